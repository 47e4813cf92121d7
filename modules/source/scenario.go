package source

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/audio/voices"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/userdirs"
	"go.yaml.in/yaml/v3"
)

// ErrInvalidScenario is wrapped by every error about the content of a scenario file.
var ErrInvalidScenario = errors.New("invalid scenario")

// maxScenarioBytes bounds what LoadScenario reads: scenarios are short hand-written files.
const maxScenarioBytes = 1 << 20

// maxTimelinePosition bounds times in a scenario: a day is far beyond any test.
const maxTimelinePosition = 24 * time.Hour

// Scenario is a timeline of recordings for replay tests: each recording starts at its
// own time, overlapping ones are mixed, and the whole plays as one continuous 16 kHz
// mono stream followed by Tail of silence (so that the end of the last utterance is
// seen by the VAD). Marks and the free-form Expect/Note strings are not played; they
// are there for the tests and reports that read the scenario.
//
// A scenario file in YAML:
//
//	name: barge-in
//	description: the user interrupts the agent's answer
//	tail: 3.0                        # seconds, or a Go duration such as 1500ms
//	recordings:
//	  - file: ${PARLEY_SHARED}/audio/jfk.wav   # or relative to this file's folder
//	    says: and so my fellow americans       # optional: what it says
//	    at: 0.5
//	    role: user
//	  - file: ../shared/audio/cards-001.wav
//	    at: 9.0
//	    gain: 0.8
//	    role: barge-in
//	    expect: the agent stops within 300 ms
//	marks:
//	  - at: 9.0
//	    name: barge-in
//	    expect: agent interrupted
//	echo:                            # optional: replay on a simulated laptop
//	  delay: 30ms                    # played → microphone, seconds or a duration
//	  gain_db: -6                    # the echo path's energy gain, negative
//	  rt60: 300ms                    # the room's reverberation time (0: none)
//	  noise_db: -70                  # optional microphone noise floor, dBFS
//
// The echo block makes a replay simulate a laptop whose microphone hears its own
// speakers (Echo, audio/room): the agent's played audio is mixed back into the
// recordings. Without it nothing is mixed.
//
// A recording may be made rather than recorded (audio/voices; whoever replays the
// scenario makes it, pipeline does, into a cache):
//
//   - says: i would like uh          # spoken by a voice: engine:name
//     voice: flite:rms               # flite, festival or espeak-ng
//     pitch: -2                      # optional: semitones (−12 to 12)
//     rate: 0.9                      # optional: speaking rate (0.5 to 2)
//   - sound: {kind: hum, shape: mm-hmm, pitch: 110}   # or cough, knock, noise, room
//
// A turn with pauses in it is one sentence, spoken in one go and cut at its words: each
// of its recordings names the sentence, its cuts marked with "|", and which part it
// plays (counted from 1); its words (Says) are that part's. The voice speaks the
// sentence whole, punctuated as its speaker means it, so that a part before a pause
// ends as a speaker who goes on ends it, not as a finished sentence (audio/voices,
// Cache.SayWords):
//
//   - sentence: "i need eggs, | milk, | and some bread"
//     part: 1
//     voice: flite:slt
//   - sentence: "i need eggs, | milk, | and some bread"
//     part: 2
//     voice: flite:slt
//     after_previous: 400ms
//
// and placed relative to another recording or to the agent instead of at a time:
//
//	after_previous: 600ms          # its speech starts 600 ms after the previous
//	                               # recording's speech ends
//	after_agent: {turn: 1, offset: 200ms}
//	at: 15                         # with after_agent: the fallback
//
// A recording's speech is where its sound lies (audio.SoundBounds: within 35 dB of its
// loudest 10 ms). after_agent plays the recording so that its speech starts offset
// after the agent's turn-th turn (counted from 1, in the order the agent's turns first
// became audible) first became audible: when the speaker first reported playing that
// turn's audio. The source follows the speaker's progress IUs for this (pipeline links
// the speaker to the source in replays of such scenarios), so on a virtual clock the
// placement is deterministic; it is never earlier than one frame after the source
// learned of the turn (the frame in flight is already mixed), and when that would cut
// into the speech, it starts later. When the turn has not become audible by at (which
// after_agent requires), the recording plays at at. Source.Placements says where each
// recording played and why.
//
// event says what a recording is to the conversation, for evaluations (agent eval)
// that score what the agent did around it: turn-end (the user's turn ends with it),
// pause (the user pauses after it and goes on), backchannel, noise or interruption
// (while the agent speaks).
//
// File paths may use ${PARLEY_SHARED} or $SHARED for the shared test assets (the
// PARLEY_SHARED environment variable, else ../shared beside the project) and any other
// environment variable that is set; relative paths are taken from the scenario's folder.
//
// A recording that gives its words (says:) may be absent: where its file is not (no
// shared test assets in a plain clone), its File is empty and whoever replays the
// scenario synthesises the words (pipeline does, with espeak-ng).
type Scenario struct {
	// Path is the file the scenario came from ("" when parsed from memory).
	Path        string
	Name        string
	Description string
	// Expect is a free-form statement of what should happen, for tests and reports.
	Expect     string
	Tail       time.Duration
	Recordings []Recording
	Marks      []Mark
	// Echo, when set, is the simulated laptop's echo path (see Echo).
	Echo *room.Config
}

// Recording is one WAV file placed on the scenario's timeline.
type Recording struct {
	// File is the resolved path of the WAV file; empty when the file is absent and its
	// words (Says) are to be synthesised.
	File string
	// Says is what the recording says, when the scenario tells.
	Says string
	// At is where the recording starts on the timeline.
	At time.Duration
	// Gain scales the recording (1 by default).
	Gain float64
	// Name defaults to the file's base name.
	Name   string
	Role   string
	Expect string
	Note   string
	// Line is the line of the scenario file where the recording is listed.
	Line int
	// Voice, when set, speaks Says (the recording is made, not read from File).
	Voice *voices.Voice
	// Part, when set, is the part of a sentence Voice speaks whole that the recording
	// is (Says is the part's words).
	Part *SentencePart
	// Sound, when set, is the synthesised sound the recording is.
	Sound *voices.Sound
	// AfterPrevious, when set, places the recording's speech that long after the end of
	// the previous recording's speech (in place of At).
	AfterPrevious *time.Duration
	// AfterAgent, when set, places the recording relative to an agent turn's audio; At
	// is then where it plays if that turn never became audible by then.
	AfterAgent *AgentCue
	// Event is what the recording is to the conversation (EventTurnEnd, ...), or "".
	Event string
}

// Made reports whether the recording is made (Voice or Sound) rather than read.
func (r Recording) Made() bool { return r.Voice != nil || r.Sound != nil }

// AgentCue places a recording relative to the agent's speech.
type AgentCue struct {
	// Turn counts the agent's turns from 1 in the order they became audible.
	Turn int
	// Offset is how long after that turn first became audible the recording's speech
	// starts.
	Offset time.Duration
}

// The events a recording may be (Recording.Event).
const (
	EventTurnEnd      = "turn-end"
	EventPause        = "pause"
	EventBackchannel  = "backchannel"
	EventNoise        = "noise"
	EventInterruption = "interruption"
)

// Events lists the events a recording may be.
var Events = []string{EventTurnEnd, EventPause, EventBackchannel, EventNoise, EventInterruption}

// Mark names a moment on the timeline without playing anything, for example where a
// barge-in should be detected.
type Mark struct {
	At     time.Duration
	Name   string
	Role   string
	Expect string
	Note   string
	Line   int
}

// The YAML shapes; decoding rejects unknown fields.
type scenarioYAML struct {
	Name        string          `yaml:"name"`
	Description string          `yaml:"description"`
	Expect      string          `yaml:"expect"`
	Tail        *seconds        `yaml:"tail"`
	Recordings  []recordingYAML `yaml:"recordings"`
	Marks       []markYAML      `yaml:"marks"`
	Echo        *echoYAML       `yaml:"echo"`
}

type echoYAML struct {
	Delay   *seconds        `yaml:"delay"`
	GainDB  *float64        `yaml:"gain_db"`
	RT60    *seconds        `yaml:"rt60"`
	NoiseDB *float64        `yaml:"noise_db"`
	Noise   room.NoiseColor `yaml:"noise"`
	Seed    uint64          `yaml:"seed"`
}

type recordingYAML struct {
	File          string        `yaml:"file"`
	Says          string        `yaml:"says"`
	Sentence      string        `yaml:"sentence"`
	Part          int           `yaml:"part"`
	At            *seconds      `yaml:"at"`
	Gain          *float64      `yaml:"gain"`
	Name          string        `yaml:"name"`
	Role          string        `yaml:"role"`
	Expect        string        `yaml:"expect"`
	Note          string        `yaml:"note"`
	Voice         string        `yaml:"voice"`
	Pitch         *float64      `yaml:"pitch"`
	Rate          *float64      `yaml:"rate"`
	Sound         *soundYAML    `yaml:"sound"`
	AfterPrevious *seconds      `yaml:"after_previous"`
	AfterAgent    *agentCueYAML `yaml:"after_agent"`
	Event         string        `yaml:"event"`
}

type markYAML struct {
	At     *seconds `yaml:"at"`
	Name   string   `yaml:"name"`
	Role   string   `yaml:"role"`
	Expect string   `yaml:"expect"`
	Note   string   `yaml:"note"`
}

// seconds is a time on the timeline: a number of seconds or a Go duration string.
type seconds struct {
	d    time.Duration
	line int
}

func (s *seconds) UnmarshalYAML(n *yaml.Node) error {
	s.line = n.Line
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%w: line %d: want a time in seconds or a duration such as 1.5s", ErrInvalidScenario, n.Line)
	}
	if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > maxTimelinePosition.Seconds() {
			return fmt.Errorf("%w: line %d: time %q is out of range", ErrInvalidScenario, n.Line, n.Value)
		}
		s.d = time.Duration(math.Round(f * float64(time.Second)))
		return nil
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("%w: line %d: %q is neither seconds nor a duration such as 1.5s", ErrInvalidScenario, n.Line, n.Value)
	}
	s.d = d
	return nil
}

// LoadScenario reads a scenario file, resolves its recordings' paths and checks that
// they exist. Errors name the file and, where they can, the line.
func LoadScenario(path string) (*Scenario, error) {
	fh, err := regularfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxScenarioBytes+1))
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if len(data) > maxScenarioBytes {
		return nil, fmt.Errorf("scenario %s: %w: larger than %d bytes", path, ErrInvalidScenario, maxScenarioBytes)
	}
	sc, err := ParseScenario(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	sc.Path = path
	for i, rec := range sc.Recordings {
		if rec.File == "" {
			continue
		}
		err := regularfile.Check(rec.File)
		if errors.Is(err, fs.ErrNotExist) && (rec.Says != "" || rec.Made()) {
			sc.Recordings[i].File = "" // absent: its words are synthesised
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("scenario %s: line %d: recording: %w", path, rec.Line, err)
		}
	}
	return sc, nil
}

// ParseScenario parses a scenario from YAML; relative recording paths are resolved
// against dir. It does not touch the files.
func ParseScenario(data []byte, dir string) (*Scenario, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var raw scenarioYAML
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: the file is empty", ErrInvalidScenario)
		}
		if errors.Is(err, ErrInvalidScenario) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidScenario, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: more than one YAML document", ErrInvalidScenario)
	}
	// A second pass over the node tree finds the lines of list items, which the typed
	// decode does not keep.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidScenario, err)
	}
	recLines := itemLines(&root, "recordings")
	markLines := itemLines(&root, "marks")

	sc := &Scenario{Name: raw.Name, Description: raw.Description, Expect: raw.Expect}
	if raw.Tail != nil {
		if raw.Tail.d < 0 || raw.Tail.d > maxTimelinePosition {
			return nil, fmt.Errorf("%w: line %d: tail %v must lie between 0 and %v", ErrInvalidScenario, raw.Tail.line, raw.Tail.d, maxTimelinePosition)
		}
		sc.Tail = raw.Tail.d
	}
	if len(raw.Recordings) == 0 {
		return nil, fmt.Errorf("%w: no recordings", ErrInvalidScenario)
	}
	for i, r := range raw.Recordings {
		line := lineAt(recLines, i)
		made, err := r.made(line)
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(r.File) == "" && made == nil {
			return nil, fmt.Errorf("%w: line %d: recording without a file (or a voice that says its words, or a sound)", ErrInvalidScenario, line)
		}
		if strings.ContainsRune(r.Says, 0) || !utf8.ValidString(r.Says) {
			return nil, fmt.Errorf("%w: line %d: says: the words must be UTF-8 text", ErrInvalidScenario, line)
		}
		says := strings.TrimSpace(r.Says)
		if made != nil && made.part != nil {
			says = made.says
		}
		var file string
		if strings.TrimSpace(r.File) != "" {
			file, err = resolvePath(r.File, dir)
			switch {
			case errors.Is(err, errNoShared) && (says != "" || made != nil):
				file = "" // no shared test assets here: its words are synthesised
			case err != nil:
				return nil, fmt.Errorf("%w: line %d: %v", ErrInvalidScenario, line, err)
			}
		}
		rec := Recording{File: file, Says: says, Gain: 1, Name: r.Name, Role: r.Role, Expect: r.Expect, Note: r.Note, Line: line}
		if made != nil {
			rec.Voice, rec.Sound, rec.Part = made.voice, made.sound, made.part
		}
		if err := r.placement(&rec, i, sc.Recordings); err != nil {
			return nil, err
		}
		if r.At != nil {
			if r.At.d < 0 || r.At.d > maxTimelinePosition {
				return nil, fmt.Errorf("%w: line %d: recording time %v must lie between 0 and %v", ErrInvalidScenario, r.At.line, r.At.d, maxTimelinePosition)
			}
			rec.At = r.At.d
		}
		if r.Gain != nil {
			if g := *r.Gain; math.IsNaN(g) || g < 0 || g > 1000 {
				return nil, fmt.Errorf("%w: line %d: gain %v must lie between 0 and 1000", ErrInvalidScenario, line, g)
			}
			rec.Gain = *r.Gain
		}
		if rec.Name == "" {
			switch {
			case file != "":
				rec.Name = filepath.Base(file)
			case strings.TrimSpace(r.File) != "":
				rec.Name = filepath.Base(r.File)
			case rec.Sound != nil:
				rec.Name = rec.Sound.String()
			default:
				rec.Name = rec.Says
			}
		}
		sc.Recordings = append(sc.Recordings, rec)
	}
	for i, m := range raw.Marks {
		line := lineAt(markLines, i)
		if m.At == nil {
			return nil, fmt.Errorf("%w: line %d: mark without a time (at)", ErrInvalidScenario, line)
		}
		if m.At.d < 0 || m.At.d > maxTimelinePosition {
			return nil, fmt.Errorf("%w: line %d: mark time %v must lie between 0 and %v", ErrInvalidScenario, m.At.line, m.At.d, maxTimelinePosition)
		}
		sc.Marks = append(sc.Marks, Mark{At: m.At.d, Name: m.Name, Role: m.Role, Expect: m.Expect, Note: m.Note, Line: line})
	}
	if raw.Echo != nil {
		echo, err := raw.Echo.config(keyLine(&root, "echo"))
		if err != nil {
			return nil, err
		}
		sc.Echo = &echo
	}
	return sc, nil
}

// config checks the echo block (at line) and returns its path.
func (e *echoYAML) config(line int) (room.Config, error) {
	if e.Delay == nil || e.GainDB == nil {
		return room.Config{}, fmt.Errorf("%w: line %d: the echo block needs a delay and a gain_db", ErrInvalidScenario, line)
	}
	c := room.Config{Delay: e.Delay.d, GainDB: *e.GainDB, Noise: e.Noise, Seed: e.Seed}
	if e.RT60 != nil {
		c.RT60 = e.RT60.d
	}
	if e.NoiseDB != nil {
		c.NoiseDB = *e.NoiseDB
	}
	if err := c.Validate(); err != nil {
		return room.Config{}, fmt.Errorf("%w: line %d: echo: %v", ErrInvalidScenario, line, err)
	}
	return c, nil
}

// keyLine returns the line of a top-level key (0 when absent).
func keyLine(root *yaml.Node, key string) int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return 0
	}
	m := root.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i].Line
		}
	}
	return 0
}

// itemLines returns the line of each item of the top-level list under key.
func itemLines(root *yaml.Node, key string) []int {
	if root.Kind != yaml.DocumentNode || len(root.Content) == 0 {
		return nil
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != key || m.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		var lines []int
		for _, item := range m.Content[i+1].Content {
			lines = append(lines, item.Line)
		}
		return lines
	}
	return nil
}

func lineAt(lines []int, i int) int {
	if i < len(lines) {
		return lines[i]
	}
	return 0
}

// errNoShared is resolvePath's error for a path in the shared test assets where they
// are not.
var errNoShared = errors.New("set PARLEY_SHARED or place shared/ beside the project (or say what the recording says: says:)")

// resolvePath expands variables in p and makes it absolute against dir.
func resolvePath(p, dir string) (string, error) {
	var missing []string
	expanded := os.Expand(p, func(name string) string {
		switch name {
		case "PARLEY_SHARED", "SHARED":
			if d := sharedDir(); d != "" {
				return d
			}
		default:
			if v, ok := os.LookupEnv(name); ok {
				return v
			}
		}
		missing = append(missing, name)
		return ""
	})
	if len(missing) > 0 {
		if missing[0] == "PARLEY_SHARED" || missing[0] == "SHARED" {
			return "", fmt.Errorf("%s: $%s: %w", p, missing[0], errNoShared)
		}
		return "", fmt.Errorf("%s: environment variable $%s is not set", p, missing[0])
	}
	if !filepath.IsAbs(expanded) {
		expanded = filepath.Join(dir, expanded)
	}
	abs, err := filepath.Abs(expanded)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return abs, nil
}

// sharedDir is where the shared test assets are, "" when unknown.
func sharedDir() string {
	if d := os.Getenv("PARLEY_SHARED"); d != "" {
		return d
	}
	return userdirs.FromEnv().Shared
}
