package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// TestBenchOnALaptop: 'agent bench --laptop' replays the scenario with the simulated
// laptop's echo and cancels it, and reports the canceller's CPU time; with --live, which
// has no echo path, the flag is refused.
func TestBenchOnALaptop(t *testing.T) {
	question := testenv.SharedFile(t, "audio/v2j_what_time_is_it.wav")
	testenv.SharedFile(t, "models/stories260K.gguf")
	testenv.Command(t, "pocketsphinx", testenv.EnvFix)
	tmp := t.TempDir()
	scenario := oneQuestion(t, tmp, question)
	config := filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml")
	env := userEnv(t, t.TempDir())
	out := filepath.Join(tmp, "bench")
	code, stdout, stderr := runAgentBinary(t, env, 3*time.Minute, "bench", "--config", config, "-n", "1", "--pipeline", "predictive", "--laptop", "-o", out, scenario)
	if code != 0 {
		t.Fatalf("agent bench --laptop: exit %d\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "simulated laptop") || !strings.Contains(stdout, "echo cancellation:") {
		t.Errorf("the report names neither the laptop nor the canceller's cost:\n%s", stdout)
	}
	var report benchReport
	readBenchJSON(t, out, &report)
	if cost := report.EchoCancellation["predictive"]; !report.Laptop || cost <= 0 || cost > 0.2 {
		t.Errorf("bench.json: laptop %v, the canceller's CPU per audio second %v (want a small positive share)", report.Laptop, cost)
	}
	if turns := report.Turns["predictive"]; len(turns) != 1 {
		t.Errorf("%d exchanges, want the one question answered once (no answer to its own echo)", len(turns))
	}

	code, _, stderr = runAgentBinary(t, env, time.Minute, "bench", "--config", config, "--laptop", "--live", scenario)
	if code != 2 || !strings.Contains(stderr, "--laptop") {
		t.Errorf("agent bench --laptop --live: exit %d, want a usage error naming --laptop:\n%s", code, stderr)
	}
}
