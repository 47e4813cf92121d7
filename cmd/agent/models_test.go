package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

// runAgent runs the command line in-process and returns stdout, stderr and the exit code.
func runAgent(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"--quiet"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

// TestModelsPullFromLocalMirror downloads the real built-in silero-vad entry (its real
// size and sha256) from a local HTTP server standing in for Hugging Face.
func TestModelsPullFromLocalMirror(t *testing.T) {
	vad := testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin")
	var requests int
	mux := http.NewServeMux()
	mux.HandleFunc("/ggml-org/whisper-vad/resolve/main/ggml-silero-v6.2.0.bin", func(w http.ResponseWriter, r *http.Request) {
		requests++
		http.ServeFile(w, r, vad)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()

	stdout, stderr, code := runAgent(t, "models", "pull", "--dir", dir, "--mirror", srv.URL, "silero-vad")
	if code != 0 {
		t.Fatalf("pull exited %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "silero-vad: ok (sha256 verified)") || !strings.Contains(stderr, "100%") {
		t.Errorf("pull output lacks the verification or the progress bar:\nstdout: %s\nstderr: %s", stdout, stderr)
	}
	if stdout, _, code := runAgent(t, "models", "verify", "--dir", dir, "silero-vad"); code != 0 || !strings.Contains(stdout, "silero-vad: ok") {
		t.Errorf("verify after pull: exit %d\n%s", code, stdout)
	}
	// A second pull finds the verified file and downloads nothing.
	if _, _, code := runAgent(t, "models", "pull", "--dir", dir, "--mirror", srv.URL, "silero-vad"); code != 0 || requests != 1 {
		t.Errorf("second pull: exit %d after %d requests, want 0 and 1", code, requests)
	}
	// Corruption is caught and the fix is named.
	path := filepath.Join(dir, "ggml-silero-v6.2.0.bin")
	data, _ := os.ReadFile(path)
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, code = runAgent(t, "models", "verify", "--dir", dir, "silero-vad")
	if code == 0 || !strings.Contains(stdout, "FAILED") || !strings.Contains(stdout, "agent models pull silero-vad") {
		t.Errorf("verify of a corrupt file: exit %d\n%s", code, stdout)
	}
}

func TestModelsErrors(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		wantText string
	}{
		{[]string{"models"}, 2, "needs a subcommand"},
		{[]string{"models", "fly"}, 2, "unknown models subcommand"},
		{[]string{"models", "pull", "--dir", t.TempDir(), "no-such-model"}, 1, "no model \"no-such-model\""},
		{[]string{"models", "pull", "--dir", t.TempDir(), "--mirror", "http://127.0.0.1:1", "--retries", "0", "silero-vad"}, 1, "fetching silero-vad"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, stderr, code := runAgent(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(stdout+stderr, tt.wantText) {
				t.Errorf("exit %d, output %q; want exit %d mentioning %q", code, stdout+stderr, tt.wantCode, tt.wantText)
			}
		})
	}
}

func TestModelsList(t *testing.T) {
	stdout, _, code := runAgent(t, "models", "list", "--dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, name := range []string{"whisper-tiny.en", "whisper-base.en", "qwen2.5-0.5b-instruct", "silero-vad"} {
		if !strings.Contains(stdout, name) {
			t.Errorf("list lacks %s:\n%s", name, stdout)
		}
	}
}
