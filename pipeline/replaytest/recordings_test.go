package replaytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/pipeline/internal/pipetest"
)

// TestReplayPlacesAfterTheAgent: a scenario whose recordings are made (a voice, a sound)
// and placed after the agent's speech replays with the speaker linked to the source:
// recordings.json says where each played, and the hum's sound starts its offset after
// the agent's answer became audible in agent.wav.
func TestReplayPlacesAfterTheAgent(t *testing.T) {
	testenv.Command(t, "flite", testenv.EnvFix)
	cfg := pipetest.DemoConfig(t)
	t.Setenv("PARLEY_VOICE_CACHE", filepath.Join(t.TempDir(), "voices"))
	scenario := filepath.Join(t.TempDir(), "cued.yaml")
	const offset = 600 * time.Millisecond
	if err := os.WriteFile(scenario, []byte(`tail: 3
recordings:
  - says: what time is it
    voice: flite:slt
    at: 0.5
    event: turn-end
  - sound: {kind: hum, shape: mhm, pitch: 190}
    after_agent: {turn: 1, offset: 600ms}
    at: 20
    event: backchannel
`), 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ := pipetest.RunReplay(t, cfg, scenario)
	data, err := os.ReadFile(filepath.Join(res.OutDir, pipeline.RecordingsFile))
	if err != nil {
		t.Fatal(err)
	}
	var played []pipeline.PlayedRecording
	if err := json.Unmarshal(data, &played); err != nil {
		t.Fatal(err)
	}
	if len(played) != 2 || !played[0].Played || played[0].How != "at" || played[0].Voice != "flite:slt" || played[0].Event != "turn-end" ||
		!played[1].Played || played[1].How != "after_agent" || played[1].AgentTurn != 1 || played[1].Sound == "" {
		t.Fatalf("recordings.json: %s", data)
	}
	agent, err := audio.DecodeWAVFile(filepath.Join(res.OutDir, "agent.wav"))
	if err != nil {
		t.Fatal(err)
	}
	first := -1
	for i, v := range agent.Samples {
		if v > 1e-3 || v < -1e-3 {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatal("the agent never spoke")
	}
	audible := audio.SamplesToDuration(int64(first), agent.Rate)
	got := time.Duration(played[1].SpeechStart*float64(time.Second)) - audible
	// The source learns of the turn from the speaker's first report, a step after the
	// first sample; it places the sound from the sample the report names.
	if got < offset-15*time.Millisecond || got > offset+25*time.Millisecond {
		t.Errorf("the hum starts %v after the agent became audible (at %v), want %v", got, audible, offset)
	}
}
