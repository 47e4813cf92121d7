package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/internal/wer"
)

// runHearing runs the command line in-process and returns stdout, stderr and the exit code.
func runHearing(args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"--quiet"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

// needHearing skips (or fails in CI) when the native parts of the hearing pipeline are
// missing.
func needHearing(t *testing.T) string {
	t.Helper()
	testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin")
	testenv.Command(t, "pocketsphinx", testenv.EnvFix) // stands for the en-us model package
	return testenv.SharedFile(t, "audio/jfk.wav")
}

func TestVADCommand(t *testing.T) {
	jfk := needHearing(t)
	out, errOut, code := runHearing("vad", jfk)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "0.32 2.27\n3.27 4.41\n5.38 7.68\n8.16 10.62\n"
	if out != want {
		t.Fatalf("agent vad printed\n%s\nwant\n%s", out, want)
	}
	// Flags come after the file too; stricter settings find less speech.
	out, _, code = runHearing("vad", jfk, "--threshold", "0.9", "--min-speech", "1.5s", "--turns")
	if code != 0 || strings.Count(out, "\n") == 0 {
		t.Fatalf("exit %d, output %q", code, out)
	}
	var segs, turns int
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "# end of turn") {
			turns++
		} else {
			var s, e float64
			if _, err := fmt.Sscanf(l, "%f %f", &s, &e); err != nil || e <= s {
				t.Fatalf("line %q", l)
			}
			segs++
		}
	}
	if segs >= 4 || turns == 0 {
		t.Fatalf("threshold 0.9, min speech 1.5s: %d segments, %d turns:\n%s", segs, turns, out)
	}
}

func TestHearingCommandErrors(t *testing.T) {
	jfk := needHearing(t)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"vad"}, 2},
		{[]string{"vad", jfk, "--threshold", "2"}, 2},
		{[]string{"vad", jfk, "--threshold", "x"}, 2},
		{[]string{"vad", jfk, "--vad-model", filepath.Join(t.TempDir(), "none.bin")}, 1},
		{[]string{"vad", filepath.Join(t.TempDir(), "none.wav")}, 1},
		{[]string{"transcribe"}, 2},
		{[]string{"transcribe", jfk, "--engine", "kaldi"}, 2},
		{[]string{"transcribe", jfk, "--hop", "-1s"}, 2},
		{[]string{"transcribe", jfk, "--engine", "whisper", "--model", filepath.Join(t.TempDir(), "none.bin")}, 1},
		{[]string{"wer", "--mode", "fast"}, 2},
		{[]string{"wer", t.TempDir()}, 1},
	} {
		if _, errOut, code := runHearing(tc.args...); code != tc.code {
			t.Errorf("agent %s: exit %d, want %d (%s)", strings.Join(tc.args, " "), code, tc.code, errOut)
		}
	}
}

func TestTranscribeCommand(t *testing.T) {
	needHearing(t)
	path := testenv.SharedFile(t, "audio/goforward.wav")
	out, errOut, code := runHearing("transcribe", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "ADD ") || !strings.Contains(out, "COMMIT ") || strings.Contains(out, "UPDATE ") {
		t.Errorf("no ADD/COMMIT word stream (or UPDATEs without --updates):\n%s", out)
	}
	if !strings.HasSuffix(out, "final: go forward ten meters\n") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestTranscribeWhisperTestModel(t *testing.T) {
	needHearing(t)
	model := testenv.SharedFile(t, "models/ggml-tiny.en-for-tests.bin")
	path := testenv.SharedFile(t, "audio/cards-001.wav")
	out, errOut, code := runHearing("transcribe", "--engine", "whisper", "--model", model, "--hop", "2s", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The weightless model recognises nothing, but the utterance still completes.
	if !strings.Contains(out, "utterance 1") || !strings.HasSuffix(out, "final: \n") {
		t.Fatalf("output:\n%s", out)
	}
}

// TestWERCommand runs agent wer on a few shared recordings and checks its total against
// Debian's `pocketsphinx single` on the same files.
func TestWERCommand(t *testing.T) {
	needHearing(t)
	cli := testenv.Command(t, "pocketsphinx", testenv.EnvFix)
	shared := filepath.Join(testenv.SharedDir(t), "audio")
	dir := t.TempDir()
	files := map[string]string{
		"goforward.wav":   "go forward ten meters",
		"cards-005.wav":   "eight of spades four of clubs seven of hearts",
		"austen-0880.wav": "he was not an ill disposed young man",
	}
	tsv := "file\ttranscript\n"
	var cliTotal wer.Result
	for name, text := range files {
		if err := os.Symlink(filepath.Join(shared, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		tsv += name + "\t" + text + "\n"
		cmd := exec.Command(cli, "single", filepath.Join(shared, name))
		cmd.Dir = dir
		raw, err := cmd.Output()
		if err != nil {
			t.Fatalf("pocketsphinx single %s: %v", name, err)
		}
		var res struct {
			T string `json:"t"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(raw), &res); err != nil {
			t.Fatal(err)
		}
		cliTotal = cliTotal.Add(wer.Compare(text, res.T))
	}
	if err := os.WriteFile(filepath.Join(dir, "transcripts.tsv"), []byte(tsv), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"utterance", "stream"} {
		out, errOut, code := runHearing("wer", "--mode", mode, dir)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != len(files)+2 {
			t.Fatalf("output:\n%s", out)
		}
		var pct float64
		var errs, words int
		if _, err := fmt.Sscanf(lines[len(lines)-1], "total %f%% %d/%d", &pct, &errs, &words); err != nil || words != cliTotal.RefWords {
			t.Fatalf("total line %q (%v)", lines[len(lines)-1], err)
		}
		t.Logf("%s mode: agent wer %.2f%%, pocketsphinx single %.2f%%", mode, pct, 100*cliTotal.Rate())
		if d := pct - 100*cliTotal.Rate(); mode == "utterance" && (d > 1 || d < -1) {
			t.Errorf("agent wer %.2f%%, pocketsphinx single %.2f%%", pct, 100*cliTotal.Rate())
		}
	}
}
