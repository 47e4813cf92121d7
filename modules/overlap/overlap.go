// Package overlap weighs the sounds the user makes while the agent speaks, as they
// happen, so that the dialogue manager can tell a backchannel ("mm-hmm", "yeah"), a
// cough or a knock from a real interruption ("wait", "no, I meant…") within a few hundred
// milliseconds, long before the recogniser's final transcript.
//
// From the VAD's first sign of speech over the agent (its vad.Candidate, or a segment
// that overlaps) the module follows the sound: it analyses its acoustics frame by frame
// (voicing, spectral shape: Sound says whether it is noise, a closed-mouth hum or voice)
// and decodes the sound so far every Hop with a Recognizer whose small vocabulary holds
// the backchannels, the words that open interruptions and common words (WriteLM), so that
// a word cut short snaps to the nearest of those. Each finding is an UPDATE of one
// Evidence IU per sound; the IU is committed when the sound ended (or revoked by the VAD
// as too short for speech). The decision is the manager's: this package only measures.
package overlap

import (
	"fmt"
	"strings"
	"time"
)

// Config configures the module.
type Config struct {
	// Enabled runs the module (in an agent network: the manager then decides barge-ins
	// on its evidence).
	Enabled bool `yaml:"enabled"`
	// Hop is how much new audio triggers the next decode of the sound (40 ms). Decodes
	// never overlap: audio that arrives during one waits for the next.
	Hop time.Duration `yaml:"hop"`
	// FirstDecode is how much of the sound the first decode waits for (100 ms).
	FirstDecode time.Duration `yaml:"first_decode"`
	// PreRoll is audio before the sound's (padded) start that each decode includes;
	// LinearPreRoll the same for an echo canceller's linear output (300 ms): the VAD,
	// hearing the suppressed audio, finds a voice over the agent's 100–300 ms after it
	// began, and the linear output still has that beginning.
	PreRoll       time.Duration `yaml:"pre_roll"`
	LinearPreRoll time.Duration `yaml:"linear_pre_roll"`
	// MaxSound ends the decoding of a sound that goes on this long: the manager has long
	// decided by then (1.5 s).
	MaxSound time.Duration `yaml:"max_sound"`
	// EndSilence is how long the level must stay low for the sound to count as ended
	// (100 ms), well before the VAD's segment end (which waits for its merge gap).
	EndSilence time.Duration `yaml:"end_silence"`
	// Words are the common words of the recogniser's vocabulary beside the backchannels
	// and interrupt words (DefaultWords when empty).
	Words []string `yaml:"words"`
}

// DefaultConfig returns the defaults (disabled: pipeline turns it on).
func DefaultConfig() Config {
	return Config{
		Hop:           40 * time.Millisecond,
		FirstDecode:   100 * time.Millisecond,
		PreRoll:       150 * time.Millisecond,
		LinearPreRoll: 300 * time.Millisecond,
		MaxSound:      1500 * time.Millisecond,
		EndSilence:    100 * time.Millisecond,
	}
}

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Hop <= 0:
		return fmt.Errorf("overlap: hop %v must be positive", c.Hop)
	case c.FirstDecode < 0 || c.PreRoll < 0 || c.LinearPreRoll < 0 || c.EndSilence < 0:
		return fmt.Errorf("overlap: first_decode, pre_roll, linear_pre_roll and end_silence must not be negative")
	case c.MaxSound < c.FirstDecode:
		return fmt.Errorf("overlap: max_sound %v is shorter than first_decode %v", c.MaxSound, c.FirstDecode)
	}
	return nil
}

// Sound is the acoustic judgement of a sound.
type Sound uint8

const (
	// Unknown: too little of the sound analysed yet.
	Unknown Sound = iota
	// Noise: not a voice (mostly unvoiced: a cough, a rustle, a burst of noise; or
	// impulsive: knocks, clicks).
	Noise
	// Hum: a voice with the mouth closed ("mm", "mm-hmm", "hmm"): voiced, its power
	// far below 1 kHz, hardly any frication.
	Hum
	// Voice: voiced sound with an open mouth: speech (or a laugh, a vowel-like filler).
	Voice
)

var soundNames = [...]string{Unknown: "unknown", Noise: "noise", Hum: "hum", Voice: "voice"}

func (s Sound) String() string {
	if int(s) < len(soundNames) {
		return soundNames[s]
	}
	return fmt.Sprintf("sound(%d)", uint8(s))
}

// MarshalText writes the sound's name.
func (s Sound) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Word is a word of a decode of the sound.
type Word struct {
	Text string
	// Confidence is the recogniser's posterior probability of the word (0–1). On a
	// word cut short it means little: decodes of the same sound revise it.
	Confidence float32
}

// Evidence is the payload of the module's IUs (kind "overlap"): what is known about one
// sound the user made while the agent was audible. ADDed when the sound began, UPDATEd
// as it is analysed and decoded, COMMITted when it ended and its last decode is in, or
// committed with Dropped set when the VAD withdrew it.
type Evidence struct {
	// Start is the stream position where the sound began (the VAD's padded onset).
	Start time.Duration
	// Heard is how much of the sound has been analysed: the stream position of the
	// last sample seen, minus Start.
	Heard time.Duration
	// Ended is set once the sound has stopped (its level fell for EndSilence, or the
	// VAD ended its segment); End is where. A sound that starts again clears it.
	Ended bool
	End   time.Duration
	// Dropped: the VAD withdrew the sound as too short to be speech.
	Dropped bool
	// Sound is the acoustic judgement so far; Voiced the share of the sound's frames
	// that are voiced, HumLike the share of voiced frames that sound hummed.
	Sound   Sound
	Voiced  float64
	HumLike float64
	// Words is the latest decode of the sound (with its pre-roll), DecodedTo how much
	// of the sound it covered.
	Words     []Word
	DecodedTo time.Duration
	Decodes   int
}

// Kind implements iu.Payload.
func (Evidence) Kind() string { return "overlap" }

// Summary implements iu.Payload.
func (e Evidence) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %.0fms", e.Sound, e.Heard.Seconds()*1000)
	if len(e.Words) > 0 {
		b.WriteString(" ")
		for i, w := range e.Words {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s(%.2f)", w.Text, w.Confidence)
		}
	}
	switch {
	case e.Dropped:
		b.WriteString(" dropped")
	case e.Ended:
		b.WriteString(" ended")
	}
	return b.String()
}

// Text joins the decoded words.
func (e Evidence) Text() string {
	t := make([]string, len(e.Words))
	for i, w := range e.Words {
		t[i] = w.Text
	}
	return strings.Join(t, " ")
}
