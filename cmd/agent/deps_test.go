package main

import (
	"os/exec"
	"path"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

// TestBinaryLinksNoTestHelper: the shipped binary links none of the project's test
// helpers (internal/testenv, internal/pulsetest, the modules' …test packages); what the
// agent itself needs of them lives in proper packages (internal/pulseserver).
func TestBinaryLinksNoTestHelper(t *testing.T) {
	testenv.Command(t, "go", testenv.EnvFix)
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const module = "github.com/parley-voice/parley/"
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, module) && strings.Contains(path.Base(pkg), "test") {
			t.Errorf("cmd/agent links the test helper %s", pkg)
		}
	}
}
