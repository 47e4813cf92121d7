package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/configdoc"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/userdirs"
)

// TestConfigDocsCurrent: the keys' comments in configdoc_gen.go are those of the
// sources, and docs/CONFIG.md is what 'agent config --markdown' writes; either fails
// when someone changed a Config type or a comment without running go generate.
func TestConfigDocsCurrent(t *testing.T) {
	root := testenv.ModuleRoot(t)
	want, err := configdoc.File(root, filepath.Join(root, "pipeline"), "Config", "pipeline", "configFieldDocs")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile("configdoc_gen.go"); err != nil || !bytes.Equal(got, want) {
		t.Errorf("pipeline/configdoc_gen.go is not current (%v): run scripts/env go generate ./pipeline", err)
	}
	var md bytes.Buffer
	if err := WriteConfigMarkdown(&md, Default(userdirs.Documented())); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(root, "docs", "CONFIG.md")); err != nil || !bytes.Equal(got, md.Bytes()) {
		t.Errorf("docs/CONFIG.md is not what 'agent config --markdown' writes (%v): run scripts/env go generate ./pipeline", err)
	}
}

// TestConfigYAMLReadsBack: what 'agent config' prints is a configuration Load reads to
// the same configuration, every key commented, the defaults noted where a value differs.
func TestConfigYAMLReadsBack(t *testing.T) {
	def := testBase(t)
	cfg, err := Parse([]byte("pipeline: incremental\nllm:\n  max_tokens: 40\nturn_taking:\n  barge_in:\n    backchannels: [yeah, right]\n"), "/etc/parley", def)
	if err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	if err := WriteConfigYAML(&first, cfg, def, "my.yaml"); err != nil {
		t.Fatal(err)
	}
	text := first.String()
	for _, want := range []string{
		"# Parley's configuration: the built-in defaults merged with my.yaml.",
		"pipeline: incremental # default: predictive\n",
		"  max_tokens: 40 # default: 120\n",
		"    backchannels: [yeah, right] # default: [",
		"  # max_tokens limits each reply.\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the YAML lacks %q:\n%s", want, text)
		}
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, line := range lines {
		if k := strings.TrimSpace(line); k != "" && !strings.HasPrefix(k, "#") && (i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#")) {
			t.Errorf("line %d has no comment above it: %q", i+1, line)
		}
	}
	again, err := Parse(first.Bytes(), "/etc/parley", def)
	if err != nil {
		t.Fatalf("the YAML does not load: %v\n%s", err, text)
	}
	var second bytes.Buffer
	if err := WriteConfigYAML(&second, again, def, "my.yaml"); err != nil {
		t.Fatal(err)
	}
	if second.String() != text {
		a, b := strings.Split(second.String(), "\n"), strings.Split(text, "\n")
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Errorf("read back, the configuration prints differently: line %d is %q, was %q", i+1, a[i], b[i])
				break
			}
		}
	}
}
