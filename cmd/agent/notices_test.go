package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modelstore"
)

// TestNotices: NOTICES.md names every Go module of go.mod and every downloadable model
// with the licence the catalog gives it, so that adding one without its notice fails.
func TestNotices(t *testing.T) {
	root := testenv.ModuleRoot(t)
	notices, err := os.ReadFile(filepath.Join(root, "NOTICES.md"))
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	required := regexp.MustCompile(`(?m)^\s+([a-z0-9.-]+\.[a-z]+/\S+) v\S+`)
	modules := required.FindAllStringSubmatch(string(goMod), -1)
	if len(modules) == 0 {
		t.Fatal("no modules found in go.mod")
	}
	for _, m := range modules {
		if !strings.Contains(string(notices), "["+m[1]+"]") {
			t.Errorf("NOTICES.md does not list the Go module %s", m[1])
		}
	}
	for _, m := range modelstore.Builtin() {
		row := regexp.MustCompile("(?m)^\\|[^\\n]*`" + regexp.QuoteMeta(m.Name) + "`[^\\n]*\\| " + regexp.QuoteMeta(m.License) + " \\|$")
		if !row.Match(notices) {
			t.Errorf("NOTICES.md has no row naming the model %s with its licence %s", m.Name, m.License)
		}
	}
}
