package evalrun

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/eval"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/pipeline"
)

// TestEvalSubset runs the scenario set's CI subset (configs/eval/ci.list, about 15
// scenarios) through the three pipelines with the demo's models, as 'agent eval' does,
// and checks that the scoring works on what they did: every replay ran and every event
// was scored where the scenario meant it (a sound over the agent was over it), a smooth
// turn's question was answered, every stored agent turn holds the words heard, and the
// speaker's reports account for agent.wav. It prints the table.
//
// It does not assert the targets of turn-taking, which the current code does not all
// meet (docs/EVAL.md lists them with the figures of the whole set). Once it does, switch
// their assertion on here by default; PARLEY_EVAL_TARGETS=1 switches it on now.
func TestEvalSubset(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 15 scenarios through three pipelines")
	}
	root := testenv.ModuleRoot(t)
	for _, p := range []string{"flite", "text2wave", "espeak-ng", "sox", "pocketsphinx"} {
		testenv.Command(t, p, testenv.EnvFix)
	}
	demo := filepath.Join(root, "configs", "demo.yaml")
	cfg, err := loadConfig(demo)
	if err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{cfg.LLM.Model, cfg.VAD.Model} {
		testenv.File(t, model, "scripts/env agent models pull --demo, or the shared test assets")
	}
	scenarios, err := Scenarios([]string{filepath.Join(root, "configs", "eval", "ci.list")})
	if err != nil {
		t.Fatal(err)
	}
	// A hung replay must not take CI's 90 minutes; 15 minutes leaves room for the other
	// replay tests, which share the cores with this one in CI.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rep, err := Run(ctx, Options{
		Scenarios: scenarios, Pipelines: pipeline.Pipelines, Config: demo,
		OutDir: dir, Parallel: 2,
		Command: func(ctx context.Context, jobFile string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), jobEnv+"="+jobFile)
			return cmd
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	eval.WriteTable(&table, rep.Pipelines, rep.Summaries, false)
	t.Logf("the CI subset (%d scenarios):\n%s", len(scenarios), table.String())

	for _, p := range rep.Pipelines {
		for _, sc := range rep.Scenarios[p] {
			if sc.Error != "" {
				t.Errorf("%s %s: %s", p, sc.Scenario, sc.Error)
				continue
			}
			if !sc.HistoryExact {
				t.Errorf("%s %s: the history is not what was heard: %q", p, sc.Scenario, sc.HistoryDiffs)
			}
			if sc.UnexplainedMs > 0 || sc.SilentWords > 0 {
				t.Errorf("%s %s: the speaker's reports do not account for agent.wav: %.0f ms of sound unexplained, %d words silent",
					p, sc.Scenario, sc.UnexplainedMs, sc.SilentWords)
			}
			for _, e := range sc.Events {
				if !e.Scored {
					t.Errorf("%s %s: %s %q not scored: %s", p, sc.Scenario, e.Event, e.Recording, e.Note)
				}
				// The smooth scenarios' questions come long after any answer: each is
				// answered, by a turn of its own.
				if strings.HasPrefix(sc.Scenario, "smooth-") && e.Event == eval.EventTurnEnd && !e.Takeover {
					t.Errorf("%s %s: %q was not answered: %+v", p, sc.Scenario, e.Recording, e)
				}
			}
		}
	}
	if os.Getenv("PARLEY_EVAL_TARGETS") == "1" {
		for _, tg := range rep.Targets {
			if !tg.Met {
				t.Errorf("target %s: want %s, got %s", tg.Name, tg.Want, tg.Got)
			}
		}
	}
}
