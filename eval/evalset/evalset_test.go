package evalset

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/source"
)

// TestCommittedSetIsGenerated: configs/eval is what the generator makes (run
// scripts/eval-set after changing it), and nothing else.
func TestCommittedSetIsGenerated(t *testing.T) {
	dir := filepath.Join(testenv.ModuleRoot(t), "configs", "eval")
	files := Generate()
	want := map[string]bool{}
	for _, f := range files {
		want[f.Name] = true
		got, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Errorf("%s: %v (run scripts/eval-set)", f.Name, err)
			continue
		}
		if string(got) != string(f.Data) {
			t.Errorf("configs/eval/%s differs from what the generator makes (run scripts/eval-set)", f.Name)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !want[e.Name()] {
			t.Errorf("configs/eval/%s is not the generator's (run scripts/eval-set, which removes it)", e.Name())
		}
	}
}

// TestSetCoversTheIssue: at least 60 scenarios, each a valid scenario with events; every
// kind of event and every kind of scenario the evaluation needs is there, in voices of
// the three engines with their pitch and rate varied; about 15 run in CI, of every kind.
func TestSetCoversTheIssue(t *testing.T) {
	files := Generate()
	var ci []string
	kinds := map[string]int{}
	events := map[string]int{}
	engines := map[string]bool{}
	pitches, rates := map[string]bool{}, map[string]bool{}
	n := 0
	for _, f := range files {
		if f.Name == CIList {
			for _, l := range strings.Split(string(f.Data), "\n") {
				if l != "" && !strings.HasPrefix(l, "#") {
					ci = append(ci, l)
				}
			}
			continue
		}
		n++
		sc, err := source.ParseScenario(f.Data, "/")
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if sc.Name+".yaml" != f.Name {
			t.Errorf("%s is named %q", f.Name, sc.Name)
		}
		kind := sc.Name[:strings.LastIndex(sc.Name, "-")]
		kinds[kind]++
		scored := 0
		for _, r := range sc.Recordings {
			if r.Event != "" {
				events[r.Event]++
				scored++
			}
			if r.Voice != nil {
				engines[r.Voice.Engine] = true
				pitches[r.Voice.String()] = r.Voice.Pitch != 0
				rates[r.Voice.String()] = r.Voice.Rate != 0 && r.Voice.Rate != 1
			}
			if !r.Made() {
				t.Errorf("%s: recording %q is not made at replay time", f.Name, r.Name)
			}
		}
		if scored == 0 {
			t.Errorf("%s scores nothing", f.Name)
		}
	}
	if n < 60 {
		t.Errorf("%d scenarios, want at least 60", n)
	}
	for _, k := range []string{"smooth", "hesitation-filled", "hesitation-silent", "list", "trailing", "two-questions", "backchannel-word",
		"backchannel-hum", "noise", "room", "barge-in-early", "barge-in-late", "restart"} {
		if kinds[k] == 0 {
			t.Errorf("no %s scenario", k)
		}
	}
	for _, e := range source.Events {
		if events[e] < 5 {
			t.Errorf("%d %s events, want at least 5", events[e], e)
		}
	}
	if len(engines) != 3 || !slices.Contains(slices.Collect(maps.Values(pitches)), true) || !slices.Contains(slices.Collect(maps.Values(rates)), true) {
		t.Errorf("engines %v; some pitch shifted %v, some rate %v", engines, pitches, rates)
	}
	if len(ci) < 12 || len(ci) > 18 {
		t.Errorf("%d scenarios in CI, want about 15", len(ci))
	}
	ciKinds := map[string]bool{}
	for _, c := range ci {
		name := strings.TrimSuffix(c, ".yaml")
		ciKinds[name[:strings.LastIndex(name, "-")]] = true
	}
	if len(ciKinds) != len(kinds) {
		t.Errorf("CI runs %d kinds of scenario of %d", len(ciKinds), len(kinds))
	}
}
