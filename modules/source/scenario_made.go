package source

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/audio/voices"
)

// soundYAML is a recording's sound: block (voices.Sound).
type soundYAML struct {
	Kind   string   `yaml:"kind"`
	Shape  string   `yaml:"shape"`
	Pitch  float64  `yaml:"pitch"`
	Seed   uint64   `yaml:"seed"`
	Count  int      `yaml:"count"`
	Length *seconds `yaml:"length"`
	Level  float64  `yaml:"level"`
}

// agentCueYAML is a recording's after_agent: block.
type agentCueYAML struct {
	Turn   int      `yaml:"turn"`
	Offset *seconds `yaml:"offset"`
}

// maxAgentTurn bounds after_agent's turn: a scenario is a short conversation.
const maxAgentTurn = 1000

// madeRecording is how a recording is made, when it is.
type madeRecording struct {
	voice *voices.Voice
	sound *voices.Sound
	// part and says: the part of a sentence the voice speaks, and its words.
	part *SentencePart
	says string
}

// SentencePart is a recording that is a part of a sentence a voice speaks whole.
type SentencePart struct {
	// Sentence is the sentence as the voice speaks it (its cut marks left out).
	Sentence string
	// Index is the part's place in the sentence, counted from 1, and Parts how many
	// parts the sentence has.
	Index, Parts int
	// From and To are the part's first and last word in the sentence
	// (voices.Words), counted from 1.
	From, To int
}

// maxSentenceBytes bounds a sentence: a turn of a conversation, not a text.
const maxSentenceBytes = 1000

// sentencePart reads the sentence and part keys of a recording a voice makes.
func (r recordingYAML) sentencePart() (*SentencePart, string, error) {
	if strings.TrimSpace(r.Says) != "" {
		return nil, "", fmt.Errorf("a part of a sentence says the part's words: leave out says")
	}
	if len(r.Sentence) > maxSentenceBytes || strings.ContainsRune(r.Sentence, 0) || !utf8.ValidString(r.Sentence) {
		return nil, "", fmt.Errorf("sentence: want UTF-8 text of at most %d bytes", maxSentenceBytes)
	}
	text, parts, err := voices.SplitSentence(r.Sentence)
	if err != nil {
		return nil, "", fmt.Errorf("sentence: %v", err)
	}
	if r.Part < 1 || r.Part > len(parts) {
		return nil, "", fmt.Errorf("part %d: the sentence has %d parts (cut with %q): want part 1 to %d", r.Part, len(parts), voices.CutMark, len(parts))
	}
	w := parts[r.Part-1]
	p := &SentencePart{Sentence: text, Index: r.Part, Parts: len(parts), From: w.From, To: w.To}
	return p, voices.PartText(text, w.From, w.To), nil
}

// made reads the voice, pitch, rate and sound keys of the recording at line.
func (r recordingYAML) made(line int) (*madeRecording, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrInvalidScenario, line, fmt.Sprintf(format, args...))
	}
	if r.Voice == "" && (r.Pitch != nil || r.Rate != nil) {
		return nil, bad("pitch and rate shift a voice: give the voice (voice: engine:name)")
	}
	if r.Voice == "" && (r.Sentence != "" || r.Part != 0) {
		return nil, bad("a sentence is spoken by a voice: give the voice (voice: engine:name)")
	}
	if r.Sentence == "" && r.Part != 0 {
		return nil, bad("part %d: of which sentence (sentence: with its cuts marked %q)?", r.Part, voices.CutMark)
	}
	switch {
	case r.Voice != "" && r.Sound != nil:
		return nil, bad("a recording is a voice or a sound, not both")
	case r.Voice != "":
		var part *SentencePart
		var says string
		if r.Sentence != "" {
			var err error
			if part, says, err = r.sentencePart(); err != nil {
				return nil, bad("%v", err)
			}
		} else if strings.TrimSpace(r.Says) == "" {
			return nil, bad("voice %q: say what it says (says:, or sentence: and part:)", r.Voice)
		}
		v, err := voices.ParseVoice(r.Voice)
		if err != nil {
			return nil, bad("%v", err)
		}
		if r.Pitch != nil {
			v.Pitch = *r.Pitch
		}
		if r.Rate != nil {
			v.Rate = *r.Rate
		}
		if err := v.Validate(); err != nil {
			return nil, bad("%v", err)
		}
		return &madeRecording{voice: &v, part: part, says: says}, nil
	case r.Sound != nil:
		if strings.TrimSpace(r.Says) != "" || strings.TrimSpace(r.File) != "" {
			return nil, bad("a sound is made, with no file and no words (says:)")
		}
		s := voices.Sound{Kind: r.Sound.Kind, Shape: r.Sound.Shape, Pitch: r.Sound.Pitch, Seed: r.Sound.Seed,
			Count: r.Sound.Count, Level: r.Sound.Level}
		if r.Sound.Length != nil {
			s.Length = r.Sound.Length.d
		}
		if err := s.Validate(); err != nil {
			return nil, bad("%v", err)
		}
		return &madeRecording{sound: &s}, nil
	}
	return nil, nil
}

// placement reads the at, after_previous and after_agent keys and the event into rec,
// the i-th recording; before are the recordings listed before it.
func (r recordingYAML) placement(rec *Recording, i int, before []Recording) error {
	line := rec.Line
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrInvalidScenario, line, fmt.Sprintf(format, args...))
	}
	if r.Event != "" && !slices.Contains(Events, r.Event) {
		return bad("event %q (want one of %s)", r.Event, strings.Join(Events, ", "))
	}
	rec.Event = r.Event
	switch {
	case r.AfterPrevious != nil && r.AfterAgent != nil:
		return bad("a recording is placed after the previous one or after the agent, not both")
	case r.AfterPrevious != nil:
		if r.At != nil {
			return bad("after_previous places the recording: leave out at")
		}
		if i == 0 {
			return bad("after_previous: the first recording has no previous one")
		}
		if before[i-1].AfterAgent != nil {
			return bad("after_previous: the previous recording is placed after the agent, so its end is not known in advance")
		}
		if d := r.AfterPrevious.d; d < 0 || d > maxTimelinePosition {
			return bad("after_previous %v must lie between 0 and %v", d, maxTimelinePosition)
		}
		gap := r.AfterPrevious.d
		rec.AfterPrevious = &gap
	case r.AfterAgent != nil:
		if r.At == nil {
			return bad("after_agent needs at: where the recording plays if the agent's turn %d has not become audible by then", r.AfterAgent.Turn)
		}
		if t := r.AfterAgent.Turn; t < 1 || t > maxAgentTurn {
			return bad("after_agent: turn %d must lie between 1 and %d (the agent's turns counted from 1)", t, maxAgentTurn)
		}
		cue := AgentCue{Turn: r.AfterAgent.Turn}
		if r.AfterAgent.Offset != nil {
			cue.Offset = r.AfterAgent.Offset.d
		}
		if cue.Offset < 0 || cue.Offset > maxTimelinePosition {
			return bad("after_agent: offset %v must lie between 0 and %v", cue.Offset, maxTimelinePosition)
		}
		rec.AfterAgent = &cue
	}
	return nil
}

// Placement says where a recording played on the scenario's timeline, and why there.
type Placement struct {
	// Index is the recording's position in Scenario.Recordings.
	Index int `json:"index"`
	// Start is where the recording's file started playing on the scenario's timeline.
	Start time.Duration `json:"start"`
	// Skipped is how much of the file's start was left out (leading silence, so that an
	// after_agent recording's speech could start on time).
	Skipped time.Duration `json:"skipped,omitempty"`
	// How is PlacedAt, PlacedAfterPrevious, PlacedAfterAgent or PlacedFallback.
	How string `json:"how"`
}

// How a recording was placed (Placement.How).
const (
	PlacedAt            = "at"
	PlacedAfterPrevious = "after_previous"
	PlacedAfterAgent    = "after_agent"
	// PlacedFallback: the agent's turn had not become audible by the recording's at.
	PlacedFallback = "fallback"
)

// HasAgentCues reports whether a recording of sc is placed after the agent's speech, so
// that whoever runs it must link the speaker's progress to the source.
func (sc *Scenario) HasAgentCues() bool {
	for _, r := range sc.Recordings {
		if r.AfterAgent != nil {
			return true
		}
	}
	return false
}
