package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/eval"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestEvalCommand runs agent eval on one scenario of the set through one pipeline, in a
// new user's HOME: it prints the replay, the table and the targets, writes eval.json
// with the scenario's scores, and --score scores the replay again to the same figures.
// Bad arguments are errors that say what is wrong.
func TestEvalCommand(t *testing.T) {
	env := userEnv(t, t.TempDir())
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"eval", "--pipeline", "fast"}, 2, "--pipeline \"fast\""},
		{[]string{"eval", "-j", "0"}, 2, "-j must lie between 1 and 64"},
		{[]string{"eval", "no/such/scenarios"}, 1, "no/such/scenarios"},
		{[]string{"eval", "--score", t.TempDir()}, 1, "eval.json"},
	} {
		code, stdout, stderr := runAgentBinary(t, env, time.Minute, tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) || strings.Contains(stderr, "goroutine") {
			t.Errorf("agent %q: exit %d, want %d with %q\n%s%s", tt.args, code, tt.code, tt.want, stdout, stderr)
		}
	}

	testenv.SharedFile(t, "models/stories260K.gguf")
	testenv.Command(t, "flite", testenv.EnvFix)
	out := t.TempDir()
	code, stdout, stderr := runAgentBinary(t, env, 3*time.Minute, "eval", "--config", "configs/demo.yaml", "--pipeline", "predictive",
		"-o", out, "configs/eval/smooth-01.yaml")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"predictive  smooth-01", "smooth turn-taking TOR ↑", "targets (predictive pipeline, the demo's)", "eval.json"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout)
		}
	}
	read := func() eval.Report {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(out, "eval.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep eval.Report
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := read()
	s := rep.Summaries["predictive"]
	if s.Scenarios != 1 || s.Failed != 0 || s.SmoothTOR.N != 2 || len(rep.Scenarios["predictive"]) != 1 || len(rep.Targets) == 0 {
		t.Fatalf("eval.json: %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(out, "predictive", "smooth-01", "recordings.json")); err != nil {
		t.Error(err)
	}
	code, stdout, stderr = runAgentBinary(t, env, time.Minute, "eval", "--score", out)
	if code != 0 || !strings.Contains(stdout, "smooth turn-taking TOR") {
		t.Fatalf("--score: exit %d\n%s%s", code, stdout, stderr)
	}
	if again := read(); again.Summaries["predictive"].SmoothTOR != s.SmoothTOR || *again.Summaries["predictive"].Gap.P50 != *s.Gap.P50 {
		t.Errorf("scored again: %+v, first %+v", again.Summaries["predictive"], s)
	}
}
