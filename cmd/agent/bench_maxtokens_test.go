package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestBenchHonoursConfigMaxTokens: 'agent bench' replies as long as the config's
// llm.max_tokens allows, unless --max-tokens says otherwise.
func TestBenchHonoursConfigMaxTokens(t *testing.T) {
	question := testenv.SharedFile(t, "audio/v2j_what_time_is_it.wav")
	testenv.SharedFile(t, "models/stories260K.gguf")
	testenv.Command(t, "pocketsphinx", testenv.EnvFix)
	tmp := t.TempDir()
	demo, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(tmp, "short.yaml")
	if err := os.WriteFile(config, []byte(strings.Replace(string(demo), "max_tokens: 24", "max_tokens: 8", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	scenario := oneQuestion(t, tmp, question)
	env := userEnv(t, t.TempDir())
	reply := func(args ...string) string {
		t.Helper()
		out := filepath.Join(tmp, "bench-"+strings.Join(args, ""))
		code, stdout, stderr := runAgentBinary(t, env, 3*time.Minute, append([]string{"bench", "--config", config, "-n", "1", "--pipeline", "turn-based", "-o", out, scenario}, args...)...)
		if code != 0 {
			t.Fatalf("agent bench %q: exit %d\n%s%s", args, code, stdout, stderr)
		}
		s, err := dialogue.LoadSession(filepath.Join(out, "turn-based-1", "session"))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range s.History.Utterances() {
			if u.Speaker == dialogue.Agent {
				return u.Text
			}
		}
		t.Fatalf("agent bench %q: no reply in %+v", args, s.History.Utterances())
		return ""
	}
	short, long := reply(), reply("--max-tokens", "24")
	if n := len(strings.Fields(short)); n == 0 || n > 8 || len(strings.Fields(long)) <= n {
		t.Errorf("with the config's max_tokens 8 the reply is %q; with --max-tokens 24 %q", short, long)
	}
}
