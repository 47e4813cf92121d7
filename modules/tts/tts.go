// Package tts is the speaking module: it synthesises each committed clause of the agent's
// reply as soon as it arrives and emits the audio in small chunks, each labelled with the
// word being spoken, so that the speaker can report exactly which words the listener
// heard when the user barges in.
//
// Text goes through package normalize first (numbers, money, abbreviations, markup), and
// the engine's word timings are mapped back through it: every chunk's character span
// points into the clause text as the LLM wrote it ("3.5", not "three point five").
package tts

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/ellipsis"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/speaker"
)

// Clause is what the module speaks: one clause of an agent turn, acted on when its IU is
// committed. The LLM module's clause payload implements it, and so does Text.
type Clause interface {
	iu.Payload
	// ClauseText returns the clause's turn, its number within the turn, its text, and
	// whether it is the last clause of the turn.
	ClauseText() (turnID, clauseID int, text string, last bool)
}

// Text is a payload of text to speak outside the LLM's replies ("agent say", prompts
// from the dialogue manager). Like a clause, it is spoken when its IU is committed.
type Text struct {
	TurnID   int
	ClauseID int
	Text     string
	// More says that further text of the same turn follows; by default a Text is the
	// whole turn, and its last chunk has LastOfTurn set.
	More bool
}

// Kind implements iu.Payload.
func (Text) Kind() string { return "text" }

// Summary implements iu.Payload.
func (t Text) Summary() string {
	return fmt.Sprintf("turn %d clause %d %q", t.TurnID, t.ClauseID, ellipsis.Cut(t.Text, 60))
}

// ClauseText implements Clause.
func (t Text) ClauseText() (turnID, clauseID int, text string, last bool) {
	return t.TurnID, t.ClauseID, t.Text, !t.More
}

// Chunk is the payload of the module's speech IUs: at most ChunkDuration of audio, and
// the word of the clause that is being spoken in it.
type Chunk struct {
	// Audio is mono PCM at the engine's rate. Audio.Start counts samples from the start
	// of the clause's audio, so Audio.StartTime() is the chunk's time within the clause.
	Audio    audio.Frame
	TurnID   int
	ClauseID int
	// WordIndex numbers the words of the clause from 0 in the order they are spoken;
	// it is -1 for silence: before the first word, and for pauses (at punctuation) after
	// a word was spoken.
	WordIndex int
	// CharStart and CharEnd are the word's byte span in ClauseText, on rune boundaries.
	// For silence both are the end of the last word spoken before it (0 before the
	// first), so ClauseText[:CharEnd] is always what has been said so far in full.
	CharStart, CharEnd int
	// WordOffset is how many samples of the word the clause's earlier chunks hold, and
	// WordLength the word's length in samples, so that a listener who heard k samples of
	// this chunk heard (WordOffset+k)/WordLength of the word (HeardAt). The TTS holds a
	// word back until it ends (Config.WordHold), so WordLength is exact; a word longer
	// than WordHold is streamed before its end is known, and until then its chunks carry
	// the length known when they went out (the samples up to the end of the audio the
	// TTS had of it), which the later chunks of the word raise. Both are 0 for silence.
	WordOffset, WordLength int
	// ClauseText is the clause as the LLM wrote it.
	ClauseText string
	// Seq numbers the chunks of a clause from 0.
	Seq                         int
	FirstOfClause, LastOfClause bool
	// LastOfTurn is set on the last chunk of the last clause of a turn.
	LastOfTurn bool
	// Tentative marks the audio of a prepared clause: ADDed, and committed or revoked
	// with its clause (speaker.Tentative).
	Tentative bool
}

// IsTentative tells the speaker to hold the chunk until it is committed.
func (c Chunk) IsTentative() bool { return c.Tentative }

// Kind implements iu.Payload.
func (Chunk) Kind() string { return "speech" }

// AgentTurn tells the speaker which agent turn the chunk belongs to, so an Interrupt
// drops exactly that turn's audio (speaker.Turned).
func (c Chunk) AgentTurn() int { return c.TurnID }

// Summary implements iu.Payload.
func (c Chunk) Summary() string {
	var flags []string
	if c.FirstOfClause {
		flags = append(flags, "first")
	}
	if c.LastOfClause {
		flags = append(flags, "last")
	}
	if c.LastOfTurn {
		flags = append(flags, "end-of-turn")
	}
	s := fmt.Sprintf("turn %d clause %d #%d @%.3fs +%.0fms word %d %q", c.TurnID, c.ClauseID, c.Seq,
		c.Audio.StartTime().Seconds(), float64(c.Audio.Duration())/float64(time.Millisecond), c.WordIndex, c.Word())
	if len(flags) > 0 {
		s += " [" + strings.Join(flags, ",") + "]"
	}
	return s
}

// PCM returns the chunk's audio; it is what the speaker plays.
func (c Chunk) PCM() audio.Frame { return c.Audio }

var _ speaker.Speech = Chunk{}

// HeardAt implements speaker.Speech: where in the clause the listener is after hearing
// offset samples of the chunk. In silence, the clause was heard up to the end of the
// last word spoken.
func (c Chunk) HeardAt(offset int) dialogue.Position {
	h := dialogue.Position{TurnID: c.TurnID, ClauseID: c.ClauseID, Clause: c.ClauseText}
	if c.WordIndex < 0 {
		h.WordStart, h.WordEnd = c.CharEnd, c.CharEnd
		return h
	}
	h.WordStart, h.WordEnd = c.CharStart, c.CharEnd
	if c.WordLength > 0 {
		h.WordFraction = float64(c.WordOffset+min(offset, c.Audio.Len())) / float64(c.WordLength)
	}
	return h
}

// Word returns the text of the word being spoken ("" for silence).
func (c Chunk) Word() string {
	if c.CharStart < 0 || c.CharEnd > len(c.ClauseText) || c.CharStart > c.CharEnd {
		return ""
	}
	return c.ClauseText[c.CharStart:c.CharEnd]
}

// MaxChunkDuration is the longest chunk the module emits.
const MaxChunkDuration = 40 * time.Millisecond

// The voice settings' ranges (espeak-ng's).
const (
	MinRate   = 80
	MaxRate   = 450
	MaxPitch  = 100
	MaxVolume = 200
)

// Config configures the module and its espeak-ng voice (package espeakng reads the
// voice settings).
type Config struct {
	// Voice is an espeak-ng voice or language ("en-us", "en-gb", "fr", ...).
	Voice string `yaml:"voice"`
	// Rate is the speaking rate in words per minute (80–450).
	Rate int `yaml:"rate"`
	// Pitch is the base pitch, 1–100.
	Pitch int `yaml:"pitch"`
	// Volume is the amplitude, 1–200 (100 is normal).
	Volume int `yaml:"volume"`
	// ChunkDuration is the longest audio chunk emitted (at most 40 ms). Chunks are cut
	// shorter at word starts, so that a chunk never holds the end of one word and the
	// start of the next.
	ChunkDuration time.Duration `yaml:"chunk_duration"`
	// MinPause is how long a stretch of silence at the end of a word must be to be
	// reported as a pause (WordIndex -1) rather than as part of the word.
	MinPause time.Duration `yaml:"min_pause"`
	// WordHold is how much of a word's audio is held back until the next word starts,
	// so that the word's span can include short words the engine speaks as part of it
	// (espeak reports "on the cat" as "on" and "cat"). Longer words are streamed with
	// the span known so far; 0 streams every word at once.
	WordHold time.Duration `yaml:"word_hold"`
	// DataPath is the directory holding espeak-ng-data; empty for the library's own.
	DataPath string `yaml:"data_path"`
}

// DefaultConfig returns the defaults: espeak-ng's US English voice at its normal rate,
// pitch and volume, 20 ms chunks, pauses from 60 ms, words held up to 1 s. espeak-ng
// synthesises about a thousand times faster than real time, so holding a word back
// costs well under a millisecond.
func DefaultConfig() Config {
	return Config{
		// espeak-ng's own defaults (engines/espeak.DefaultVoice and the rest), written out
		// so that this package does not link the library.
		Voice:         "en-us",
		Rate:          175,
		Pitch:         50,
		Volume:        100,
		ChunkDuration: 20 * time.Millisecond,
		MinPause:      60 * time.Millisecond,
		WordHold:      time.Second,
	}
}

// Validate checks the module's own settings; the engine checks the voice settings.
func (c Config) Validate() error {
	var errs []error
	if c.ChunkDuration <= 0 || c.ChunkDuration > MaxChunkDuration {
		errs = append(errs, fmt.Errorf("tts: chunk_duration %v outside (0, %v]", c.ChunkDuration, MaxChunkDuration))
	}
	if c.MinPause < 0 {
		errs = append(errs, fmt.Errorf("tts: min_pause %v is negative", c.MinPause))
	}
	if c.WordHold < 0 {
		errs = append(errs, fmt.Errorf("tts: word_hold %v is negative", c.WordHold))
	}
	// The voice's ranges are espeak-ng's; 0 leaves its default.
	if c.Rate != 0 && (c.Rate < MinRate || c.Rate > MaxRate) {
		errs = append(errs, fmt.Errorf("tts: rate %d is not in %d–%d words per minute", c.Rate, MinRate, MaxRate))
	}
	if c.Pitch < 0 || c.Pitch > MaxPitch {
		errs = append(errs, fmt.Errorf("tts: pitch %d is not in 0–%d", c.Pitch, MaxPitch))
	}
	if c.Volume < 0 || c.Volume > MaxVolume {
		errs = append(errs, fmt.Errorf("tts: volume %d is not in 0–%d", c.Volume, MaxVolume))
	}
	return errors.Join(errs...)
}
