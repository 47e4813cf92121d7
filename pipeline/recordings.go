package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/modules/source"
)

// RecordingsFile is the file, in a scenario replay's folder, that says where each of the
// scenario's recordings played and where its speech lay: the input's side of the
// conversation, which evaluations (agent eval) score the agent's output against.
const RecordingsFile = "recordings.json"

// PlayedRecording is one entry of RecordingsFile.
type PlayedRecording struct {
	// Index is the recording's position in the scenario, Line its line in the file.
	Index int    `json:"index"`
	Line  int    `json:"line"`
	Name  string `json:"name"`
	Role  string `json:"role,omitempty"`
	// Event is what the recording is to the conversation (source.Recording.Event).
	Event string `json:"event,omitempty"`
	Says  string `json:"says,omitempty"`
	// Sentence and Part: the recording is the Part-th part of Sentence, which its voice
	// spoke whole (source.SentencePart).
	Sentence string `json:"sentence,omitempty"`
	Part     int    `json:"part,omitempty"`
	// Voice or Sound made the recording (the voice's and the sound's descriptions).
	Voice string `json:"voice,omitempty"`
	Sound string `json:"sound,omitempty"`
	File  string `json:"file"`
	// Played is false for a recording the scenario never reached (the replay stopped
	// first); the times are then zero.
	Played bool `json:"played"`
	// How it was placed (source.Placement.How), and the agent turn it followed.
	How       string `json:"how,omitempty"`
	AgentTurn int    `json:"agent_turn,omitempty"`
	Offset    string `json:"offset,omitempty"`
	// Start is where the file started playing, SpeechStart and SpeechEnd where its sound
	// lay (audio.SoundBounds), in seconds on the replay's timeline (the timeline's,
	// user.wav's and agent.wav's).
	Start       float64 `json:"start"`
	SpeechStart float64 `json:"speech_start"`
	SpeechEnd   float64 `json:"speech_end"`
	Gain        float64 `json:"gain"`
}

// writeRecordings writes RecordingsFile for sc from where its source placed them.
func writeRecordings(path string, sc *source.Scenario, placed []source.Placement) error {
	out := make([]PlayedRecording, len(sc.Recordings))
	for i, r := range sc.Recordings {
		out[i] = PlayedRecording{Index: i, Line: r.Line, Name: r.Name, Role: r.Role, Event: r.Event, Says: r.Says, File: r.File, Gain: r.Gain}
		if r.Voice != nil {
			out[i].Voice = r.Voice.String()
		}
		if r.Sound != nil {
			out[i].Sound = r.Sound.String()
		}
		if r.Part != nil {
			out[i].Sentence, out[i].Part = r.Part.Sentence, r.Part.Index
		}
		if r.AfterAgent != nil {
			out[i].AgentTurn, out[i].Offset = r.AfterAgent.Turn, r.AfterAgent.Offset.String()
		}
	}
	for _, p := range placed {
		if p.Index < 0 || p.Index >= len(out) {
			continue
		}
		e := &out[p.Index]
		on, off, err := audio.SoundBoundsFile(e.File)
		if err != nil {
			return fmt.Errorf("%s: recording %q: %w", filepath.Base(path), e.Name, err)
		}
		// Leading samples the source left out shift the file's sound earlier.
		start := p.Start - p.Skipped
		e.Played, e.How = true, p.How
		e.Start = p.Start.Seconds()
		e.SpeechStart = max(start+on, p.Start).Seconds()
		e.SpeechEnd = max(start+off, p.Start).Seconds()
	}
	data, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
