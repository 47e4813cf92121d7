package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPlotLeavesNoEmptySVG: 'agent plot' of a timeline it cannot draw (empty, or not a
// timeline) fails without leaving an SVG behind, and keeps an SVG that was there; a
// good timeline gets its SVG, with a legend.
func TestPlotLeavesNoEmptySVG(t *testing.T) {
	env := userEnv(t, t.TempDir())
	tmp := t.TempDir()
	good := filepath.Join(tmp, "good.jsonl")
	if err := os.WriteFile(good, []byte(`{"t":0.1,"module":"asr","iu":"asr/1","type":"add","kind":"word","payload":"hello"}
{"t":0.5,"module":"asr","iu":"asr/1","type":"commit","kind":"word","payload":"hello"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, content string }{
		{"empty", ""},
		{"garbage", "this is not a timeline\n"},
	} {
		in := filepath.Join(tmp, tt.name+".jsonl")
		if err := os.WriteFile(in, []byte(tt.content), 0o600); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runAgentBinary(t, env, time.Minute, "plot", in)
		if code == 0 || !strings.Contains(stderr, in) {
			t.Errorf("plot of the %s timeline: exit %d\n%s%s", tt.name, code, stdout, stderr)
		}
		if _, err := os.Stat(filepath.Join(tmp, tt.name+".svg")); !os.IsNotExist(err) {
			t.Errorf("plot of the %s timeline left an SVG (%v)", tt.name, err)
		}
	}
	// An SVG already there is not replaced by a failed plot.
	keep := filepath.Join(tmp, "keep.svg")
	if err := os.WriteFile(keep, []byte("<svg/>"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runAgentBinary(t, env, time.Minute, "plot", "-o", keep, filepath.Join(tmp, "empty.jsonl")); code == 0 {
		t.Error("plot of an empty timeline succeeded")
	}
	if data, _ := os.ReadFile(keep); string(data) != "<svg/>" {
		t.Errorf("a failed plot changed the SVG there: %q", data)
	}
	code, stdout, stderr := runAgentBinary(t, env, time.Minute, "plot", good)
	svg, err := os.ReadFile(filepath.Join(tmp, "good.svg"))
	if code != 0 || err != nil || !strings.Contains(string(svg), ">committed<") || !strings.Contains(stdout, "wrote ") {
		t.Errorf("plot of a good timeline: exit %d, %v\n%s%s", code, err, stdout, stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
