package replaytest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/pipeline/internal/pipetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestLogNamesCoverTheNetwork: every module of the built networks (each pipeline) and
// every logger they write to is named in LogNames, the list --log-modules checks names
// against.
func TestLogNamesCoverTheNetwork(t *testing.T) {
	shared := testenv.SharedDir(t)
	scenario := pipetest.WriteScenario(t, 2, filepath.Join(shared, "audio", "v2j_what_time_is_it.wav"), 0.5)
	known := pipeline.LogNames()
	for _, pipe := range pipeline.Pipelines {
		t.Run(pipe, func(t *testing.T) {
			cfg := pipeline.WithPipeline(pipetest.DemoConfig(t), pipe)
			eng, err := pipeline.LoadEngines(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			core, logs := observer.New(zapcore.DebugLevel)
			sent := &pipetest.Senders{Names: map[string]bool{}}
			ctx, cancel := pipetest.ReplayContext(t)
			defer cancel()
			var console strings.Builder
			if _, err := pipeline.Replay(ctx, cfg, eng, pipeline.ReplayOptions{Input: scenario, OutDir: t.TempDir(), Record: true, Console: &console,
				Logger: zap.New(core), Observers: []iu.Observer{sent}}); err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for name := range sent.Names {
				names[name] = true
			}
			for _, e := range logs.All() {
				first, _, _ := strings.Cut(e.LoggerName, ".")
				names[first] = true
			}
			for name := range names {
				if !slices.Contains(known, name) {
					t.Errorf("%q sends IUs or logs, but LogNames (%v) lacks it", name, known)
				}
			}
			if len(names) < 5 {
				t.Errorf("only %v seen", names)
			}
		})
	}
}
