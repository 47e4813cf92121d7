// Package voices makes speech and sounds that stand in for a user: speech in voices other
// than the agent's (Debian's flite, festival and espeak-ng, through their command-line
// programs, with pitch and rate varied through sox), and synthesised hums, coughs,
// knocks, noise bursts and a room's steady noise (synth.go); and the parts of a sentence
// spoken in one go, cut between its words where pocketsphinx aligned them
// (sentence.go), for a turn with pauses in it. The evaluation's scenarios
// and the tests use it. Nothing it makes is committed: sounds are kept in a cache keyed
// by their recipe, so a second run does not synthesise again. Every engine here is
// deterministic, so a cached sound is the sound its recipe makes anywhere.
package voices

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Rate is the sample rate of every sound this package makes (16 kHz mono).
const Rate = 16000

// Engines are the speech engines Voice may name.
var Engines = []string{"flite", "festival", "espeak-ng"}

// Voice is a text-to-speech voice of one of the engines Debian ships, optionally shifted
// in pitch and rate.
type Voice struct {
	// Engine is "flite", "festival" or "espeak-ng".
	Engine string
	// Name is the engine's voice: flite's kal, slt, rms, awb; festival's kal_diphone or
	// cmu_us_slt_arctic_hts; an espeak-ng voice with its variant ("en-us+f3").
	Name string
	// Pitch shifts the voice's pitch by this many semitones (−12 to 12; 0: as the engine
	// speaks).
	Pitch float64
	// Rate scales the speaking rate (0.5 to 2; 0 or 1: as the engine speaks; 1.1 is 10 %
	// faster), keeping the pitch.
	Rate float64
}

// Limits of a voice's shifts.
const (
	MaxPitchShift = 12.0
	MinRate       = 0.5
	MaxRate       = 2.0
)

// voiceName is what a voice name may hold: it goes on a command line.
var voiceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$`)

// ParseVoice reads "engine:name" ("flite:slt", "espeak-ng:en-us+f3").
func ParseVoice(s string) (Voice, error) {
	engine, name, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Voice{}, fmt.Errorf("voice %q: want engine:name, such as flite:slt, festival:kal_diphone or espeak-ng:en-us+f3", s)
	}
	v := Voice{Engine: engine, Name: name}
	return v, v.Validate()
}

// Validate checks the engine, the name's characters and the shifts.
func (v Voice) Validate() error {
	known := false
	for _, e := range Engines {
		known = known || v.Engine == e
	}
	switch {
	case !known:
		return fmt.Errorf("voice %s: unknown engine %q (want one of %s)", v, v.Engine, strings.Join(Engines, ", "))
	case !voiceName.MatchString(v.Name):
		return fmt.Errorf("voice %s: the name must be letters, digits and _ . + - (at most 64)", v)
	case math.IsNaN(v.Pitch) || math.Abs(v.Pitch) > MaxPitchShift:
		return fmt.Errorf("voice %s: pitch %v semitones must lie between %v and %v", v, v.Pitch, -MaxPitchShift, MaxPitchShift)
	case math.IsNaN(v.Rate) || v.Rate != 0 && (v.Rate < MinRate || v.Rate > MaxRate):
		return fmt.Errorf("voice %s: rate %v must lie between %v and %v", v, v.Rate, MinRate, MaxRate)
	}
	return nil
}

// shifted reports whether the voice's pitch or rate differ from the engine's own.
func (v Voice) shifted() bool { return v.Pitch != 0 || v.Rate != 0 && v.Rate != 1 }

// String is "engine:name", with the shifts when there are any: "flite:slt pitch +2 rate 0.9".
func (v Voice) String() string {
	s := v.Engine + ":" + v.Name
	if v.Pitch != 0 {
		s += " pitch " + strconv.FormatFloat(v.Pitch, 'f', -1, 64)
		if v.Pitch > 0 {
			s = strings.Replace(s, "pitch ", "pitch +", 1)
		}
	}
	if v.Rate != 0 && v.Rate != 1 {
		s += " rate " + strconv.FormatFloat(v.Rate, 'f', -1, 64)
	}
	return s
}

// The kinds of Sound.
const (
	KindHum   = "hum"
	KindCough = "cough"
	KindKnock = "knock"
	KindNoise = "noise"
	KindRoom  = "room"
)

// Kinds lists the kinds of Sound.
var Kinds = []string{KindHum, KindCough, KindKnock, KindNoise, KindRoom}

// Sound is the recipe of a synthesised sound. The zero values of its fields take the
// kind's defaults (Defaults).
type Sound struct {
	// Kind is hum, cough, knock, noise (a short burst) or room (steady noise).
	Kind string
	// Shape is a hum's: mm-hmm, hmm or mhm.
	Shape string
	// Pitch is a hum's base pitch in Hz (60–400; a low male voice hums at about 100, a
	// female voice at about 200).
	Pitch float64
	// Seed makes a cough, knock, noise or room differ from another of its kind.
	Seed uint64
	// Count is how many knocks (1–8).
	Count int
	// Length is a noise burst's (50 ms–2 s) or a room noise's (up to 10 min).
	Length time.Duration
	// Level is the sound's peak (0–1); a room noise's RMS level.
	Level float64
}

// Defaults returns s with its kind's defaults where fields are zero.
func (s Sound) Defaults() Sound {
	if s.Level == 0 {
		s.Level = map[string]float64{KindHum: 0.4, KindCough: 0.5, KindKnock: 0.6, KindNoise: 0.4, KindRoom: 0.01}[s.Kind]
	}
	switch s.Kind {
	case KindHum:
		if s.Shape == "" {
			s.Shape = MmHmm.String()
		}
		if s.Pitch == 0 {
			s.Pitch = 120
		}
	case KindKnock:
		if s.Count == 0 {
			s.Count = 2
		}
	case KindNoise:
		if s.Length == 0 {
			s.Length = 200 * time.Millisecond
		}
	}
	return s
}

// Validate checks the recipe (after Defaults): each field in its range, and no field
// that the kind does not use.
func (s Sound) Validate() error {
	d := s.Defaults()
	uses := map[string]string{KindHum: "shape pitch level", KindCough: "seed level", KindKnock: "seed count level",
		KindNoise: "seed length level", KindRoom: "seed length level"}[s.Kind]
	if uses == "" {
		return fmt.Errorf("sound: unknown kind %q (want one of %s)", s.Kind, strings.Join(Kinds, ", "))
	}
	for field, set := range map[string]bool{"shape": s.Shape != "", "pitch": s.Pitch != 0, "seed": s.Seed != 0,
		"count": s.Count != 0, "length": s.Length != 0} {
		if set && !strings.Contains(uses, field) {
			return fmt.Errorf("sound: a %s has no %s (it takes %s)", s.Kind, field, uses)
		}
	}
	switch {
	case math.IsNaN(d.Level) || d.Level <= 0 || d.Level > 1:
		return fmt.Errorf("sound: level %v must lie in (0, 1]", d.Level)
	case s.Kind == KindHum && humShape(d.Shape) < 0:
		return fmt.Errorf("sound: hum shape %q (want mm-hmm, hmm or mhm)", d.Shape)
	case s.Kind == KindHum && (math.IsNaN(d.Pitch) || d.Pitch < 60 || d.Pitch > 400):
		return fmt.Errorf("sound: hum pitch %v Hz must lie between 60 and 400", d.Pitch)
	case s.Kind == KindKnock && (d.Count < 1 || d.Count > 8):
		return fmt.Errorf("sound: %d knocks; want 1 to 8", d.Count)
	case s.Kind == KindNoise && (d.Length < 50*time.Millisecond || d.Length > 2*time.Second):
		return fmt.Errorf("sound: a noise burst of %v; want 50ms to 2s", d.Length)
	case s.Kind == KindRoom && (d.Length <= 0 || d.Length > 10*time.Minute):
		return fmt.Errorf("sound: a room noise needs a length up to 10m (got %v)", d.Length)
	}
	return nil
}

// humShape returns the shape named name, or -1.
func humShape(name string) HumShape {
	for _, h := range []HumShape{MmHmm, Hmm, Mhm} {
		if h.String() == name {
			return h
		}
	}
	return -1
}

// Samples synthesises the sound (Validate it first), at Rate.
func (s Sound) Samples() []float32 {
	d := s.Defaults()
	switch d.Kind {
	case KindHum:
		return Hum(humShape(d.Shape), d.Pitch, d.Level)
	case KindCough:
		return Cough(d.Seed, d.Level)
	case KindKnock:
		return Knock(d.Seed, d.Count, d.Level)
	case KindNoise:
		return Noise(d.Seed, d.Length.Seconds(), d.Level)
	case KindRoom:
		return Room(d.Seed, d.Length.Seconds(), d.Level)
	}
	return nil
}

// String describes the recipe with its defaults filled in; it keys the cache.
func (s Sound) String() string {
	d := s.Defaults()
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	switch d.Kind {
	case KindHum:
		return fmt.Sprintf("hum %s %s Hz level %s", d.Shape, f(d.Pitch), f(d.Level))
	case KindKnock:
		return fmt.Sprintf("knock %d seed %d level %s", d.Count, d.Seed, f(d.Level))
	case KindNoise, KindRoom:
		return fmt.Sprintf("%s %v seed %d level %s", d.Kind, d.Length, d.Seed, f(d.Level))
	}
	return fmt.Sprintf("%s seed %d level %s", d.Kind, d.Seed, f(d.Level))
}
