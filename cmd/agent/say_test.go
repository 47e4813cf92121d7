package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/tts"
)

const sayHelperEnv = "PARLEY_SAY_HELPER_ARGS"

// runSayAgent runs the command line in-process and returns stdout, stderr and the exit code.
func runSayAgent(args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"--quiet"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

// sayWords parses the word lines of agent say's output: start, end, byte span, word.
func sayWords(t *testing.T, stdout string) []string {
	t.Helper()
	line := regexp.MustCompile(`^(\d+\.\d{3})\s+(\d+\.\d{3})\s+(\d+)-(\d+)\s+(.+)$`)
	var words []string
	for _, l := range strings.Split(stdout, "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			start, _ := strconv.ParseFloat(m[1], 64)
			end, _ := strconv.ParseFloat(m[2], 64)
			if end <= start {
				t.Errorf("word %q does not end after it starts: %s", m[5], l)
			}
			words = append(words, m[5])
		}
	}
	return words
}

func TestSayWritesWAVAndTimings(t *testing.T) {
	if os.Getenv(sayHelperEnv) != "" {
		t.Skip("helper process")
	}
	out := filepath.Join(t.TempDir(), "say.wav")
	text := "Héllo café, it costs $3.50 — 12% off!"
	stdout, stderr, code := runSayAgent("say", "-o", out, "--chunk", "40ms", text)
	if code != 0 {
		if strings.Contains(stderr, "espeak") {
			testenv.Missing(t, "a working libespeak-ng", testenv.EnvFix)
		}
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	f, err := audio.DecodeWAVFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.Rate != 22050 || f.Channels != 1 || f.Duration().Seconds() < 1 {
		t.Fatalf("WAV %s", f.Summary())
	}
	want := []string{"Héllo", "café", "it", "costs", "$3.50", "12%", "off"}
	if got := sayWords(t, stdout); !slices.Equal(got, want) {
		t.Fatalf("words %q, want %q\n%s", got, want, stdout)
	}
	if !strings.Contains(stdout, "spoken as: Héllo café, it costs three dollars and fifty cents — twelve percent off!") {
		t.Fatalf("no spoken form in\n%s", stdout)
	}
	if _, _, code := runSayAgent("say"); code != 2 {
		t.Fatalf("no text: exit %d, want 2", code)
	}
	if _, _, code := runSayAgent("say", "--chunk", "80ms", "hi"); code != 2 {
		t.Fatalf("chunk too long: exit %d, want 2", code)
	}
	stdout, _, code = runSayAgent("say", "--voices")
	if code != 0 || !strings.Contains(stdout, "en-us") {
		t.Fatalf("--voices: exit %d\n%s", code, stdout)
	}
}

// TestSayHelper is TestSayMatchesCLI's fresh process for agent say.
func TestSayHelper(t *testing.T) {
	args := os.Getenv(sayHelperEnv)
	if args == "" {
		t.Skip("runs only as TestSayMatchesCLI's helper process")
	}
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runSayAgent(argv...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// TestSayMatchesCLI checks that agent say's WAV holds exactly the samples that the
// espeak-ng command line writes for the same text and voice (both in fresh processes,
// since libespeak-ng's output depends on what the process synthesised before).
func TestSayMatchesCLI(t *testing.T) {
	if os.Getenv(sayHelperEnv) != "" {
		t.Skip("helper process")
	}
	cli := testenv.Command(t, "espeak-ng", testenv.EnvFix)
	tests := []struct {
		text  string
		flags []string
	}{
		{"Hello there, this is Parley speaking.", nil},
		{"Naïve café owners in Zürich, déjà vu!", []string{"--voice", "en-gb", "--rate", "220", "--pitch", "60", "--volume", "130"}},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "say.wav")
			args := append(append([]string{"say", "-o", out}, tt.flags...), tt.text)
			cmd := exec.Command(os.Args[0], "-test.run=^TestSayHelper$", "-test.count=1", "-test.v")
			spec, err := json.Marshal(args)
			if err != nil {
				t.Fatal(err)
			}
			cmd.Env = append(os.Environ(), sayHelperEnv+"="+string(spec))
			if b, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(b, []byte("--- PASS: TestSayHelper")) {
				t.Fatalf("agent say: %v\n%s", err, b)
			}
			got, err := audio.DecodeWAVFile(out)
			if err != nil {
				t.Fatal(err)
			}
			// The same settings for espeak-ng: agent say's defaults unless the test sets them
			// (espeak-ng's own default voice is "en", not agent say's "en-us").
			def := tts.DefaultConfig()
			settings := map[string]string{"-v": def.Voice, "-s": strconv.Itoa(def.Rate), "-p": strconv.Itoa(def.Pitch), "-a": strconv.Itoa(def.Volume)}
			for i := 0; i+1 < len(tt.flags); i += 2 {
				settings[map[string]string{"--voice": "-v", "--rate": "-s", "--pitch": "-p", "--volume": "-a"}[tt.flags[i]]] = tt.flags[i+1]
			}
			cliArgs := []string{"--stdout"}
			for _, f := range []string{"-v", "-s", "-p", "-a"} {
				cliArgs = append(cliArgs, f, settings[f])
			}
			wav, err := exec.Command(cli, append(cliArgs, tt.text)...).Output()
			if err != nil {
				t.Fatalf("espeak-ng: %v", err)
			}
			// Writing to a pipe, espeak-ng cannot patch its header and declares a huge data
			// chunk; the decoder reports that as truncation and returns every sample.
			want, err := audio.DecodeWAV(bytes.NewReader(wav))
			if err != nil && !errors.Is(err, audio.ErrTruncated) {
				t.Fatalf("espeak-ng --stdout: %v", err)
			}
			if got.Rate != want.Rate || len(got.Samples) != len(want.Samples) {
				t.Fatalf("agent say %s, espeak-ng %s", got.Summary(), want.Summary())
			}
			for i := range want.Samples {
				if got.Samples[i] != want.Samples[i] {
					t.Fatalf("sample %d: %v, espeak-ng %v", i, got.Samples[i], want.Samples[i])
				}
			}
		})
	}
}
