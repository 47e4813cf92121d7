package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

func TestGenerateCommand(t *testing.T) {
	model := testenv.SharedFile(t, "models/stories260K.gguf")
	simple := testenv.Command(t, "llama-simple", testenv.EnvFix)
	want, err := exec.Command(simple, "-m", model, "-n", "40", "Once upon a time").Output()
	if err != nil {
		t.Fatal(err)
	}
	gen := func(args ...string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"--quiet", "generate"}, args...), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	out, errOut, code := gen("--model", model, "--prompt", "Once upon a time", "--max-tokens", "40", "--threads", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// llama-simple prints "<s> " and the prompt first; greedy output is the same.
	if got, w := "<s> Once upon a time"+out, string(want); got != w {
		t.Errorf("agent generate printed %q, llama-simple %q", out, w)
	}
	if !strings.Contains(errOut, "40 tokens (stop: length)") {
		t.Errorf("statistics line: %q", errOut)
	}
	for _, args := range [][]string{
		{"--max-tokens", "3"},
		{"-n", "3"}, // gone: --max-tokens, as chat and bench spell it
		{"--engine", "nope", "--prompt", "x"},
		{"--prompt", "x"},
		{"--model", model, "--prompt", "x", "extra"},
	} {
		if _, _, code := gen(args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if _, errOut, code := gen("--engine", "http", "--url", "http://127.0.0.1:1", "--prompt", "x", "--max-tokens", "2"); code != 1 || !strings.Contains(errOut, "unreachable") {
		t.Errorf("unreachable server: exit %d, %q", code, errOut)
	}
}
