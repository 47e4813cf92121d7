package main

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

// The bad inputs of issue 37: outputs that name something other than a regular file,
// endless or huge inputs, and values that cannot work. The real binary runs each; it must
// end (never hang), destroy nothing, say what was wrong (with the key or flag and its
// range), and never show a Go runtime trace.

// noTrace fails the test when a Go panic or runtime trace reached the user.
func noTrace(t *testing.T, what, stderr string) {
	t.Helper()
	for _, sign := range []string{"goroutine ", "runtime.", "panic:", "fatal error:", "SIGABRT", "SIGSEGV"} {
		if strings.Contains(stderr, sign) {
			t.Errorf("%s: a runtime trace reached the user (%q):\n%s", what, sign, stderr)
			return
		}
	}
}

// fileIdentity is what a refused write must leave as it was: a path's type and inode (a
// rename over it would make a new inode), and a regular file's contents.
type fileIdentity struct {
	mode fs.FileMode
	dev  uint64
	ino  uint64
	data string
}

func identityOf(t *testing.T, path string) fileIdentity {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	id := fileIdentity{mode: st.Mode(), dev: uint64(sys.Dev), ino: sys.Ino}
	if st.Mode().IsRegular() {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		id.data = string(b)
	}
	return id
}

// TestOutputsNeverReplaceDevicesFIFOsOrLinks: every command that writes a path the user
// named leaves a device, a FIFO and a symbolic link (and the file it points to) as they
// were. say streams its WAV into a device or a FIFO; the others refuse them. The only
// devices written are /dev/null and /dev/full.
func TestOutputsNeverReplaceDevicesFIFOsOrLinks(t *testing.T) {
	testenv.SharedFile(t, "models/stories260K.gguf")
	demo := filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml")
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	env := userEnv(t, home)
	mkfifo := func(path string) string {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// kept is a file that links point to: it must keep its contents.
	kept := filepath.Join(tmp, "kept.txt")
	if err := os.WriteFile(kept, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := func(path string) string {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(kept, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	timeline := filepath.Join(tmp, "timeline.jsonl")
	if err := os.WriteFile(timeline, []byte(`{"t":0.1,"module":"asr","iu":"asr/1","type":"add","kind":"word","payload":"hello"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		args   []string
		target string // the path that must stay as it was
		ok     bool   // the command succeeds (it streamed into the target)
		want   string // what the output must say
		reader bool   // a reader drains the FIFO target (and must get a WAV)
	}{
		{name: "say into /dev/null", args: []string{"say", "-o", os.DevNull, "hello"}, target: os.DevNull, ok: true, want: "streamed to /dev/null"},
		{name: "say into /dev/full", args: []string{"say", "-o", "/dev/full", "hello"}, target: "/dev/full", want: "streaming the WAV to /dev/full: audio: writing WAV data: write /dev/full: no space left on device"},
		{name: "say into a FIFO", args: []string{"say", "-o", mkfifo(filepath.Join(tmp, "say", "fifo.wav")), "hello"}, target: filepath.Join(tmp, "say", "fifo.wav"), ok: true, reader: true, want: "streamed to "},
		{name: "say through a link", args: []string{"say", "-o", link(filepath.Join(tmp, "say", "link.wav")), "hello"}, target: filepath.Join(tmp, "say", "link.wav"), want: "link.wav is a symbolic link, not a regular file: it is left as it is"},
		{name: "plot into /dev/null", args: []string{"plot", "-o", os.DevNull, timeline}, target: os.DevNull, want: "/dev/null is a character device, not a regular file"},
		{name: "plot into a FIFO", args: []string{"plot", "-o", mkfifo(filepath.Join(tmp, "plot", "fifo.svg")), timeline}, target: filepath.Join(tmp, "plot", "fifo.svg"), want: "fifo.svg is a FIFO, not a regular file"},
		{name: "plot through a link", args: []string{"plot", "-o", link(filepath.Join(tmp, "plot", "link.svg")), timeline}, target: filepath.Join(tmp, "plot", "link.svg"), want: "link.svg is a symbolic link"},
		{name: "replay's heard.wav a FIFO", args: []string{"replay", "--config", demo, "-o", filepath.Join(tmp, "replay1"), timeline}, target: mkfifo(filepath.Join(tmp, "replay1", "heard.wav")), want: "heard.wav is a FIFO, not a regular file"},
		{name: "replay's transcript a link", args: []string{"replay", "--config", demo, "-o", filepath.Join(tmp, "replay2"), timeline}, target: link(filepath.Join(tmp, "replay2", "transcript.txt")), want: "transcript.txt is a symbolic link"},
		{name: "bench.json a FIFO", args: []string{"bench", "--config", demo, "-n", "1", "-o", filepath.Join(tmp, "bench")}, target: mkfifo(filepath.Join(tmp, "bench", "bench.json")), want: "bench.json is a FIFO, not a regular file"},
		{name: "live --timeline /dev/null", args: []string{"live", "--config", demo, "--timeline", os.DevNull}, target: os.DevNull, want: "--timeline: /dev/null is a character device, not a regular file"},
		{name: "live --timeline through a link", args: []string{"live", "--config", demo, "--timeline", link(filepath.Join(tmp, "live", "t.jsonl"))}, target: filepath.Join(tmp, "live", "t.jsonl"), want: "t.jsonl is a symbolic link"},
		{name: "--log-file through a link", args: []string{"--log-file", link(filepath.Join(tmp, "logs", "agent.jsonl")), "sessions"}, target: filepath.Join(tmp, "logs", "agent.jsonl"), want: "agent.jsonl is a symbolic link"},
		{name: "--log-file a FIFO nobody reads", args: []string{"--log-file", mkfifo(filepath.Join(tmp, "logs", "fifo.jsonl")), "sessions"}, target: filepath.Join(tmp, "logs", "fifo.jsonl"), want: "fifo.jsonl is a FIFO that nobody reads"},
		{name: "--log-file /dev/null", args: []string{"--log-file", os.DevNull, "sessions"}, target: os.DevNull, ok: true},
		{name: "models pull over a FIFO", args: []string{"models", "pull", "--mirror", "http://127.0.0.1:9", "silero-vad"}, target: mkfifo(filepath.Join(home, "models", "ggml-silero-v6.2.0.bin")), want: "ggml-silero-v6.2.0.bin is a FIFO, not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := identityOf(t, tt.target)
			keptBefore := identityOf(t, kept)
			got := make(chan []byte, 1)
			if tt.reader {
				go func() {
					f, err := os.Open(tt.target)
					if err != nil {
						got <- nil
						return
					}
					defer f.Close()
					b, _ := io.ReadAll(f)
					got <- b
				}()
			}
			extra := []string{"PARLEY_MODELS=" + filepath.Join(home, "models")}
			code, stdout, stderr := runAgentBinary(t, append(env, extra...), hangLimit, tt.args...)
			noTrace(t, tt.name, stderr)
			if (code == 0) != tt.ok || !strings.Contains(stdout+stderr, tt.want) {
				t.Errorf("agent %s: exit %d, want success %v and %q:\n%s%s", strings.Join(tt.args, " "), code, tt.ok, tt.want, stdout, stderr)
			}
			if after := identityOf(t, tt.target); after != before {
				t.Errorf("%s changed: %+v → %+v", tt.target, before, after)
			}
			if after := identityOf(t, kept); after != keptBefore {
				t.Errorf("the file a link points to changed: %+v → %+v", keptBefore, after)
			}
			if tt.reader {
				if b := <-got; !bytes.HasPrefix(b, []byte("RIFF")) || len(b) < 1000 {
					t.Errorf("the FIFO's reader got %d bytes, not a WAV", len(b))
				}
			}
		})
	}
}

// TestEndlessInputsAreRefused: text read from standard input or a file has a limit, and
// an endless input (/dev/zero as standard input) or a file past it ends in an error
// that names the input and the limit, not in the runtime running out of memory.
func TestEndlessInputsAreRefused(t *testing.T) {
	stories := testenv.SharedFile(t, "models/stories260K.gguf")
	demo := filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml")
	tmp := t.TempDir()
	env := userEnv(t, tmp)
	bigConfig := filepath.Join(tmp, "big.yaml")
	if err := os.WriteFile(bigConfig, bytes.Repeat([]byte("# a comment line that goes on and on\n"), (2<<20)/37), 0o600); err != nil {
		t.Fatal(err)
	}
	wavs := filepath.Join(tmp, "wavs")
	if err := os.MkdirAll(wavs, 0o755); err != nil {
		t.Fatal(err)
	}
	tsv := filepath.Join(wavs, "transcripts.tsv")
	var b bytes.Buffer
	b.WriteString("file\ttranscript\n")
	for b.Len() <= 16<<20 {
		b.WriteString("a.wav\tthe same words over and over again and again\n")
	}
	if err := os.WriteFile(tsv, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		zero  bool // standard input is /dev/zero
		want  string
		usage bool
	}{
		{name: "say -", args: []string{"say", "-o", filepath.Join(tmp, "x.wav"), "-"}, zero: true, want: "reading the text to say: standard input is larger than 1 MiB, the limit for it"},
		{name: "generate --prompt -", args: []string{"generate", "--model", stories, "--prompt", "-"}, zero: true, want: "reading the prompt: standard input is larger than 4 MiB, the limit for it"},
		{name: "chat on an endless line", args: []string{"chat", "--config", demo}, zero: true, want: "reading input: a line is larger than 1 MiB, the limit for it"},
		{name: "a config file", args: []string{"chat", "--config", bigConfig}, want: bigConfig + " is larger than 1 MiB, the limit for it"},
		{name: "transcripts.tsv", args: []string{"wer", wavs}, want: tsv + " is larger than 16 MiB, the limit for it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdin *os.File
			if tt.zero {
				zero, err := os.Open("/dev/zero")
				if err != nil {
					t.Fatal(err)
				}
				defer zero.Close()
				stdin = zero
			}
			p := startAgent(t, env, stdin, append([]string{"--quiet"}, tt.args...)...)
			code := p.wait(t, hangLimit)
			stderr := p.stderrText()
			noTrace(t, tt.name, stderr)
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("agent %s: exit %d, want an error saying %q:\n%s", strings.Join(tt.args, " "), code, tt.want, stderr)
			}
		})
	}
}

// TestBadValuesAreRefused: a value that cannot work, in a config file or a flag, is an
// error naming its key (or flag) and range, before anything is asked of the user; thread
// counts beyond the cores are capped with a note instead.
func TestBadValuesAreRefused(t *testing.T) {
	stories := testenv.SharedFile(t, "models/stories260K.gguf")
	jfk := testenv.SharedFile(t, "audio/jfk.wav")
	testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin")
	demo := filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml")
	tmp := t.TempDir()
	sessions := filepath.Join(tmp, "sessions")
	env := userEnv(t, tmp, "PARLEY_SESSIONS="+sessions)
	config := func(name, yaml string) string {
		p := filepath.Join(tmp, name+".yaml")
		if err := os.WriteFile(p, []byte(yaml+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// demoWith is the demo config with one more section (one the demo does not have).
	demoWith := func(name, yaml string) string {
		data, err := os.ReadFile(demo)
		if err != nil {
			t.Fatal(err)
		}
		return config(name, string(data)+"\n"+yaml)
	}
	llmWith := func(extra string) string {
		return "llm: {engine: llama, model: " + stories + ", max_tokens: 4, " + extra + "}\ndialogue: {prompt_format: plain}"
	}
	tests := []struct {
		name string
		args []string
		want []string
		ok   bool // accepted (with a note)
	}{
		{name: "vad.threshold NaN", args: []string{"chat", "--config", config("nan", "vad: {threshold: .nan}")}, want: []string{"vad.threshold: NaN is not a finite number", "threshold NaN is not in (0, 1]"}},
		{name: "vad --threshold NaN", args: []string{"vad", "--threshold", "NaN", jfk}, want: []string{`invalid value "NaN" for flag -threshold: "NaN" is not a number in (0, 1]`}},
		{name: "generate --temp Inf", args: []string{"generate", "--model", stories, "--temp", "Inf", "hello"}, want: []string{`invalid value "Inf" for flag -temp: "Inf" is not a finite number ≥ 0`}},
		{name: "generate --top-p 2", args: []string{"generate", "--model", stories, "--top-p", "2", "hello"}, want: []string{`"2" is not a number in [0, 1]`}},
		{name: "generate --ctx beyond the model", args: []string{"generate", "--model", stories, "--ctx", "100000", "hello"}, want: []string{"--ctx: 100000 tokens is more than the model was trained on (want 1–"}},
		{name: "generate --threads 100000", args: []string{"generate", "--model", stories, "--threads", "100000", "--max-tokens", "2", "hello"}, ok: true, want: []string{"threads capped: --threads 100000 is more than the machine's"}},
		{name: "say --voice en-zz", args: []string{"say", "--voice", "en-zz", "-o", filepath.Join(tmp, "v.wav"), "hello"}, want: []string{`--voice: "en-zz" is not one of espeak-ng's voices; close: `, "en-us"}},
		{name: "tts.voice en-zz", args: []string{"replay", "--config", demoWith("voice", "tts: {voice: en-zz}"), "-o", filepath.Join(tmp, "r"), jfk}, want: []string{`voice: "en-zz" is not one of espeak-ng's voices`}},
		{name: "session name with control bytes", args: []string{"chat", "--config", demo, "--session", "a\tb\x1b[2J"}, want: []string{`--session: invalid session name "a\tb\x1b[2J": it holds '\t'`, "1 to 64 of A–Z"}},
		{name: "session name of 300 characters", args: []string{"chat", "--config", demo, "--session", strings.Repeat("x", 300)}, want: []string{"--session: invalid session name", "300 bytes long"}},
		{name: "session.name in the config", args: []string{"chat", "--config", config("name", "session: {name: \"a b\"}")}, want: []string{"session.name: invalid session name \"a b\": it holds ' '"}},
	}
	// The values of issue 37 in a config file.
	for _, v := range []struct{ yaml, key, want string }{
		{llmWith("context: 2000000000"), "context 2000000000", "is not in 0–1048576"},
		{llmWith("context: 100000"), "llm.context: 100000 tokens is more than the model was trained on", "want 1–"},
		{llmWith("temperature: .nan"), "llm.temperature: NaN is not a finite number", "want a finite number ≥ 0"},
		{llmWith("temperature: .inf"), "llm.temperature: +Inf is not a finite number", "want a finite number ≥ 0"},
		{"dialogue: {min_word_fraction: .nan}", "min_word_fraction NaN", "[0, 1]"},
	} {
		tests = append(tests, struct {
			name string
			args []string
			want []string
			ok   bool
		}{name: v.key, args: []string{"chat", "--config", config(fmt.Sprintf("value%d", len(tests)), v.yaml)}, want: []string{v.key, v.want}})
	}
	tests = append(tests, struct {
		name string
		args []string
		want []string
		ok   bool
	}{name: "llm.threads 100000", args: []string{"chat", "--config", config("threads", llmWith("threads: 100000, threads_batch: 100000"))}, ok: true,
		want: []string{"threads capped: llm.threads 100000 is more than the machine's", "threads capped: llm.threads_batch 100000"}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Standard input holds a line: a command that asked for it before refusing
			// would answer it.
			in, err := os.Open(writeTemp(t, "Hello there\n"))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			p := startAgent(t, env, in, append([]string{"--log-level", "warn"}, tt.args...)...)
			code := p.wait(t, hangLimit)
			stdout, stderr := p.stdout.String(), p.stderrText()
			noTrace(t, tt.name, stderr)
			if (code == 0) != tt.ok {
				t.Errorf("agent %q: exit %d, want success %v:\n%s%s", tt.args, code, tt.ok, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout+stderr, w) {
					t.Errorf("agent %q does not say %q:\n%s%s", tt.args, w, stdout, stderr)
				}
			}
			if !tt.ok && strings.Contains(stdout, "Storyteller:") {
				t.Errorf("agent %q answered before refusing:\n%s", tt.args, stdout)
			}
		})
	}
	if entries, _ := os.ReadDir(sessions); len(entries) > 1 {
		t.Errorf("sessions were made by refused commands: %v", entries)
	}
}

// writeTemp writes content to a temporary file and returns its path.
func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
