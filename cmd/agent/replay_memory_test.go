package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestReplayMemoryDoesNotGrowWithLength: what a replay holds depends on what is said,
// not on how long the session runs. The same two questions a minute apart and an hour
// apart (configs/scenarios/long), each replayed by the agent binary in a process of its
// own on the virtual clock: the hour's peak memory (VmHWM, as the replay reports it) is
// within 1.2 times the minute's, and its files cover the hour.
func TestReplayMemoryDoesNotGrowWithLength(t *testing.T) {
	testenv.SharedFile(t, "models/stories260K.gguf")
	testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin")
	testenv.Command(t, "pocketsphinx", testenv.EnvFix) // stands for the en-us model
	home := t.TempDir()
	replay := func(scenario string, length time.Duration) (peakMiB int) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "replay")
		code, stdout, stderr := runAgentBinary(t, userEnv(t, home), 5*time.Minute,
			"replay", "--config", "configs/demo.yaml", "-o", out, filepath.Join("configs", "scenarios", "long", scenario))
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", scenario, code, stdout, stderr)
		}
		m := regexp.MustCompile(`(?m)^replayed .* in (\S+) \(wall clock; peak memory (\d+) MiB\)$`).FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("%s: no peak memory reported:\n%s", scenario, stdout)
		}
		peakMiB, _ = strconv.Atoi(m[2])
		t.Logf("%s: peak memory %d MiB, replayed in %s", scenario, peakMiB, m[1])
		for _, name := range []string{"heard.wav", "user.wav", "agent.wav"} {
			f, err := audio.StatWAVFile(filepath.Join(out, name))
			if err != nil {
				t.Fatal(err)
			}
			if d := f.Duration(); d < length {
				t.Errorf("%s: %s lasts %v, want at least %v", scenario, name, d, length)
			}
		}
		transcript, err := os.ReadFile(filepath.Join(out, "transcript.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(transcript), " user "); n < 2 {
			t.Errorf("%s: the transcript holds %d user turns, want both questions:\n%s", scenario, n, transcript)
		}
		return peakMiB
	}
	short := replay("two-questions-a-minute-apart.yaml", time.Minute)
	long := replay("two-questions-an-hour-apart.yaml", time.Hour)
	if float64(long) > 1.2*float64(short) {
		t.Errorf("the hour-long replay peaked at %d MiB, more than 1.2 × the minute-long one's %d MiB", long, short)
	}
}
