package pipetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/pipeline"
)

// Window is the measuring resolution.
const Window = 10 * time.Millisecond

// At is the time of measuring window i.
func At(i int) time.Duration { return time.Duration(i) * Window }

// AgentAudio reads the agent's rendered output (agent.wav) of a replay.
func AgentAudio(t *testing.T, res *pipeline.ReplayResult) audio.Frame {
	t.Helper()
	f, err := audio.DecodeWAVFile(filepath.Join(res.OutDir, "agent.wav"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// SoundTimeline lists those updates of the timeline file path from time from to time to
// (on the timeline's own clock).
func SoundTimeline(path string, from, to time.Duration) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	entries, err := iu.ReadTimeline(f)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	lastGain := ""
	for _, e := range entries {
		if e.T < from.Seconds() || e.T > to.Seconds() {
			continue
		}
		switch e.Kind {
		case "vad", "vad-candidate", "overlap", "control", "user-turn", "utterance", "agent-turn":
		case "progress":
			g := ""
			if i := strings.Index(e.Payload, " dB"); i > 0 {
				g = e.Payload[strings.LastIndex(e.Payload[:i], " ")+1 : i]
			}
			if g == lastGain && !strings.Contains(e.Payload, "(") {
				continue
			}
			lastGain = g
		default:
			continue
		}
		fmt.Fprintf(&b, "  %7.3fs %-8s %-6s %s\n", e.T, e.Module, e.Type, e.Payload)
	}
	return b.String()
}

// FirstSound returns the first sample that is not silence, or -1.
func FirstSound(f audio.Frame) int {
	for i, x := range f.Samples {
		if x > 1e-3 || x < -1e-3 {
			return i
		}
	}
	return -1
}
