package pipeline

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// senders records the modules that sent IUs.
type senders struct {
	mu    sync.Mutex
	names map[string]bool
}

func (s *senders) Observe(_ time.Time, m iu.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names[m.From] = true
}

// TestLogNamesCoverTheNetwork: every module of the built networks (each pipeline) and
// every logger they write to is named in LogNames, the list --log-modules checks names
// against.
func TestLogNamesCoverTheNetwork(t *testing.T) {
	shared := testenv.SharedDir(t)
	scenario := writeScenario(t, 2, filepath.Join(shared, "audio", "v2j_what_time_is_it.wav"), 0.5)
	known := LogNames()
	for _, pipe := range Pipelines {
		t.Run(pipe, func(t *testing.T) {
			cfg := WithPipeline(demoConfig(t), pipe)
			eng, err := LoadEngines(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			core, logs := observer.New(zapcore.DebugLevel)
			sent := &senders{names: map[string]bool{}}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			var console strings.Builder
			if _, err := Replay(ctx, cfg, eng, ReplayOptions{Input: scenario, OutDir: t.TempDir(), Record: true, Console: &console,
				Logger: zap.New(core), Observers: []iu.Observer{sent}}); err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for name := range sent.names {
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
