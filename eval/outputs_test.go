package eval

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
)

// TestRead reads a replay's folder: the recordings, agent.wav's levels, the chunks with
// their fate and the progress reports from the timeline, and the history.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(RecordingsFile, `[{"index": 0, "name": "q", "role": "user", "event": "turn-end", "played": true, "how": "at", "start": 0.5, "speech_start": 0.6, "speech_end": 1.2}]`)
	write(SessionFile, `{"version": 1, "history": {"utterances": [{"speaker": "user", "text": "hi", "turn_id": 1}, {"speaker": "agent", "text": "Anna, you", "turn_id": 2, "interrupted": true, "full_text": "Anna, you can"}]}}`)
	var tl strings.Builder
	for _, e := range []iu.TimelineEntry{
		{T: 1, Module: "tts", IU: "tts/1", Type: iu.Add, Kind: "speech", Payload: `turn 2 clause 0 #0 @0.000s +20ms word 0 "Anna" [first]`},
		{T: 1, Module: "tts", IU: "tts/1", Type: iu.Commit, Kind: "speech", Payload: `turn 2 clause 0 #0 @0.000s +20ms word 0 "Anna" [first]`},
		{T: 1, Module: "tts", IU: "tts/2", Type: iu.Add, Kind: "speech", Payload: `turn 2 clause 0 #1 @0.020s +20ms word 1 "you"`},
		{T: 1, Module: "tts", IU: "tts/2", Type: iu.Revoke, Kind: "speech", Payload: `turn 2 clause 0 #1 @0.020s +20ms word 1 "you"`},
		{T: 1.01, Module: "speaker", IU: "speaker/1", Type: iu.Add, Kind: "progress", Payload: "playing @1.010s tts/1 220/441 -12.0 dB (playing)"},
		{T: 1.01, Module: "speaker", IU: "speaker/1", Type: iu.Commit, Kind: "progress", Payload: "playing @1.010s tts/1 220/441 -12.0 dB (playing)"},
		{T: 1.01, Module: "vad", IU: "vad/1", Type: iu.Add, Kind: "vad", Payload: "anything"},
	} {
		b, _ := json.Marshal(e)
		tl.Write(append(b, '\n'))
	}
	write(TimelineFile, tl.String())
	samples := make([]float32, 16000*2)
	for i := 16000; i < 16000+320; i++ {
		samples[i] = 0.1
	}
	if err := audio.WriteWAVFile(filepath.Join(dir, AgentAudioFile), audio.Frame{Samples: samples, Rate: 16000, Channels: 1}, 16); err != nil {
		t.Fatal(err)
	}
	o, err := Read(dir, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Recordings) != 1 || o.Recordings[0].SpeechStart() != 600*time.Millisecond || o.Recordings[0].Cued() || o.Recordings[0].Background() {
		t.Errorf("recordings %+v", o.Recordings)
	}
	if len(o.Chunks) != 2 || !o.Chunks[0].Committed || o.Chunks[1].Committed || !o.Chunks[1].Revoked || o.Chunks[1].Text != "you" {
		t.Errorf("chunks %+v", o.Chunks)
	}
	if len(o.Progress) != 1 || o.Progress[0].Gain != -12 || o.Progress[0].Heard != "tts/1" {
		t.Errorf("progress %+v", o.Progress)
	}
	if len(o.Levels) != 200 || o.Levels[100] < -21 || o.Levels[99] > -100 || o.Length() != 2*time.Second {
		t.Errorf("%d levels: %v %v", len(o.Levels), o.Levels[99], o.Levels[100])
	}
	if len(o.History) != 2 || o.History[1].Text != "Anna, you" || !o.History[1].Interrupted {
		t.Errorf("history %+v", o.History)
	}

	// A summary the scoring cannot read is an error that names the file.
	write(TimelineFile, `{"t":1,"module":"tts","iu":"tts/1","type":"add","kind":"speech","payload":"chunk"}`+"\n")
	if _, err := Read(dir, 0.5); err == nil || !strings.Contains(err.Error(), TimelineFile) {
		t.Errorf("a bad summary: %v", err)
	}
	os.Remove(filepath.Join(dir, RecordingsFile))
	if _, err := Read(dir, 0.5); err == nil {
		t.Error("no recordings.json: no error")
	}
}

// FuzzParseSummaries: the timeline's summaries are outside input; no input panics, and
// what parses holds sane values.
func FuzzParseSummaries(f *testing.F) {
	for _, s := range []string{
		`turn 2 clause 0 #0 @0.000s +20ms word 0 "Anna" [first]`,
		`turn 2 clause 1 #64 @1.247s +1ms word -1 "" [last,end-of-turn]`,
		`turn 1 clause 0 #0 @0.000s +20ms word 3 "\"can't\""`,
		"playing @2.560s tts/131 220/441 (playing)",
		"stopped @4.870s tts/252 86/441 tail -12.0 dB (interrupt turn 2: barge-in: confident words (stop))",
		"idle @0.000s", "state(9) @1.000s", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := ParseChunk(s); err == nil && (c.Turn < 0 || c.Clause < 0 || c.Dur < 0) {
			t.Fatalf("chunk %q: %+v", s, c)
		}
		if p, err := ParseProgress(s); err == nil && (p.Offset < 0 || p.Length < 0) {
			t.Fatalf("progress %q: %+v", s, p)
		}
	})
}
