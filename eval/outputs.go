// Package eval scores what an agent did in replays of scenarios from its output alone:
// what the listener heard (agent.wav, and the speaker's progress reports with the speech
// chunks they name in timeline.jsonl), the stored history (session/session.json), and
// where the scenario's recordings played (recordings.json, the input's side). It never
// reads the agent's decisions, logs or latency metrics. The scores follow
// Full-Duplex-Bench's definitions where it has them and add Parley's own; docs/EVAL.md
// defines each. Package eval/evalrun runs the scenario set that feeds it.
package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/iu"
)

// Window is the resolution of the agent's audio levels.
const Window = 10 * time.Millisecond

// Recording is one of the scenario's recordings as it played (a replay's
// recordings.json, pipeline.PlayedRecording).
type Recording struct {
	Index        int     `json:"index"`
	Name         string  `json:"name"`
	Role         string  `json:"role"`
	Event        string  `json:"event"`
	Says         string  `json:"says"`
	Played       bool    `json:"played"`
	How          string  `json:"how"`
	StartS       float64 `json:"start"`
	SpeechStartS float64 `json:"speech_start"`
	SpeechEndS   float64 `json:"speech_end"`
}

// SpeechStart and SpeechEnd are where the recording's sound lay on the timeline.
func (r Recording) SpeechStart() time.Duration { return seconds(r.SpeechStartS) }
func (r Recording) SpeechEnd() time.Duration   { return seconds(r.SpeechEndS) }

// Background reports a recording that plays under the scenario (a room's noise), not
// something the user does.
func (r Recording) Background() bool { return r.Role == "background" }

// Cued reports a recording placed after the agent's speech (it exists because the agent
// spoke).
func (r Recording) Cued() bool { return r.How == "after_agent" }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Chunk is a speech chunk of the agent's (a "speech" IU of the timeline: tts.Chunk's
// summary), in the order the TTS added them.
type Chunk struct {
	ID     iu.ID
	Turn   int
	Clause int
	Seq    int
	// Word is the word's index in its clause, -1 for silence; Text the word.
	Word int
	Text string
	// Start is the chunk's time within its clause, Dur its length.
	Start, Dur time.Duration
	// Committed and Revoked are the chunk's fate: the speaker plays committed chunks,
	// in the order they were added; revoked ones (a prepared reply withdrawn) never.
	Committed, Revoked bool
}

// Progress is one of the speaker's progress reports (a "progress" IU of the timeline:
// speaker.Progress's summary): what the listener heard at Pos.
type Progress struct {
	// State is playing, paused, stopped or idle.
	State string
	// Pos is when the listener has heard Offset of Length samples of the chunk Heard.
	Pos            time.Duration
	Heard          iu.ID
	Offset, Length int
	// Tail: the device still plays what it held after a pause or stop, until Pos.
	Tail bool
	// Gain is the level heard, dB (0 full volume; negative while ducked).
	Gain   float64
	Reason string
}

// Utterance is a stored turn of the history (session.json).
type Utterance struct {
	Speaker     string `json:"speaker"`
	Text        string `json:"text"`
	TurnID      int    `json:"turn_id"`
	Interrupted bool   `json:"interrupted"`
	Backchannel bool   `json:"backchannel"`
	FullText    string `json:"full_text"`
}

// Outputs is what one replay left that the scores are made of.
type Outputs struct {
	Recordings []Recording
	Chunks     []Chunk
	Progress   []Progress
	// Levels is agent.wav's RMS level (dBFS) in every Window.
	Levels  []float64
	History []Utterance
	// MinWordFraction is how much of a word must have been heard for it to count as
	// heard (the configuration's dialogue.min_word_fraction; 0.5 when zero).
	MinWordFraction float64
}

// Length is how long the replay's output lasted.
func (o *Outputs) Length() time.Duration { return time.Duration(len(o.Levels)) * Window }

// The files of a replay's folder that Read reads.
const (
	RecordingsFile = "recordings.json"
	AgentAudioFile = "agent.wav"
	TimelineFile   = "timeline.jsonl"
	SessionFile    = "session/session.json"
)

// Read reads a replay's folder.
func Read(dir string, minWordFraction float64) (*Outputs, error) {
	o := &Outputs{MinWordFraction: minWordFraction}
	data, err := readFile(filepath.Join(dir, RecordingsFile))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &o.Recordings); err != nil {
		return nil, fmt.Errorf("%s: %w", RecordingsFile, err)
	}
	if o.Levels, err = levelsOf(filepath.Join(dir, AgentAudioFile)); err != nil {
		return nil, err
	}
	if err := o.readTimeline(filepath.Join(dir, TimelineFile)); err != nil {
		return nil, err
	}
	data, err = readFile(filepath.Join(dir, SessionFile))
	if err != nil {
		return nil, err
	}
	var session struct {
		History struct {
			Utterances []Utterance `json:"utterances"`
		} `json:"history"`
	}
	if err := json.Unmarshal(data, &session); err != nil {
		return nil, fmt.Errorf("%s: %w", SessionFile, err)
	}
	o.History = session.History.Utterances
	return o, nil
}

// maxJSONBytes bounds the JSON files Read reads whole.
const maxJSONBytes = 64 << 20

func readFile(path string) ([]byte, error) {
	f, err := regularfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxJSONBytes+1))
	if err == nil && len(data) > maxJSONBytes {
		err = fmt.Errorf("%s: larger than %d bytes", path, maxJSONBytes)
	}
	return data, err
}

// levelsOf returns the RMS level of each Window of a WAV file (channels mixed down).
func levelsOf(path string) ([]float64, error) {
	fh, err := regularfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	r, err := audio.NewWAVReader(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f := r.Format()
	n := int(audio.DurationToSamples(Window, f.Rate)) * f.Channels
	if n == 0 {
		return nil, fmt.Errorf("%s: %d Hz is too low a rate", path, f.Rate)
	}
	buf := make([]float32, n)
	var levels []float64
	for {
		got := 0
		for got < n {
			k, err := r.Read(buf[got:])
			got += k
			if errors.Is(err, io.EOF) {
				return levels, nil
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		mono := audio.Downmix(audio.Frame{Samples: buf, Rate: f.Rate, Channels: f.Channels})
		levels = append(levels, audio.DBFS(audio.RMS(mono.Samples)))
	}
}

// readTimeline takes the speech chunks and the progress reports from a timeline.
func (o *Outputs) readTimeline(path string) error {
	f, err := regularfile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	chunks := map[iu.ID]int{}
	err = iu.ScanTimeline(f, func(e iu.TimelineEntry) error {
		switch e.Kind {
		case "speech":
			i, seen := chunks[e.IU]
			switch {
			case e.Type == iu.Add && !seen:
				c, err := ParseChunk(e.Payload)
				if err != nil {
					return fmt.Errorf("%s: %s: %w", TimelineFile, e.IU, err)
				}
				c.ID = e.IU
				chunks[e.IU] = len(o.Chunks)
				o.Chunks = append(o.Chunks, c)
			case e.Type == iu.Commit && seen:
				o.Chunks[i].Committed = true
			case e.Type == iu.Revoke && seen:
				o.Chunks[i].Revoked = true
			}
		case "progress":
			if e.Type != iu.Add {
				return nil // the commit repeats the add
			}
			r, err := ParseProgress(e.Payload)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", TimelineFile, e.IU, err)
			}
			o.Progress = append(o.Progress, r)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// chunkSummary is tts.Chunk's summary: turn, clause, seq, start, duration, word index,
// the word (quoted) and flags.
var chunkSummary = regexp.MustCompile(`^turn (\d+) clause (\d+) #(\d+) @(-?[0-9.]+)s \+([0-9]+)ms word (-?\d+) ("(?:[^"\\]|\\.)*")(?: \[[a-z,-]*\])?$`)

// ParseChunk reads a speech chunk's summary.
func ParseChunk(s string) (Chunk, error) {
	m := chunkSummary.FindStringSubmatch(s)
	if m == nil {
		return Chunk{}, fmt.Errorf("a speech chunk's summary %q is not in the form tts.Chunk writes", s)
	}
	var c Chunk
	c.Turn, _ = strconv.Atoi(m[1])
	c.Clause, _ = strconv.Atoi(m[2])
	c.Seq, _ = strconv.Atoi(m[3])
	start, _ := strconv.ParseFloat(m[4], 64)
	ms, _ := strconv.Atoi(m[5])
	c.Word, _ = strconv.Atoi(m[6])
	text, err := strconv.Unquote(m[7])
	if err != nil {
		return Chunk{}, fmt.Errorf("a speech chunk's word %s: %w", m[7], err)
	}
	c.Start, c.Dur, c.Text = seconds(start), time.Duration(ms)*time.Millisecond, text
	return c, nil
}

// reportSummary is speaker.Progress's summary: state, position, the chunk heard and how
// much of it, tail, gain and reason.
var reportSummary = regexp.MustCompile(`^([a-z]+|state\(\d+\)) @(-?[0-9.]+)s(?: (\S+) (\d+)/(\d+))?( tail)?(?: (-?[0-9.]+) dB)?(?: \((.*)\))?$`)

// ParseProgress reads a progress report's summary.
func ParseProgress(s string) (Progress, error) {
	m := reportSummary.FindStringSubmatch(s)
	if m == nil {
		return Progress{}, fmt.Errorf("a progress report's summary %q is not in the form speaker.Progress writes", s)
	}
	pos, _ := strconv.ParseFloat(m[2], 64)
	r := Progress{State: m[1], Pos: seconds(pos), Heard: iu.ID(m[3]), Tail: m[6] != "", Reason: m[8]}
	r.Offset, _ = strconv.Atoi(m[4])
	r.Length, _ = strconv.Atoi(m[5])
	if m[7] != "" {
		r.Gain, _ = strconv.ParseFloat(m[7], 64)
	}
	return r, nil
}

// words splits text into lower-case words of letters, digits and apostrophes: what a
// stored turn and the words heard are compared by.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '’'
	})
}
