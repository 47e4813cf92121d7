package pipeline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/userdirs"
)

func testBase(t testing.TB) Config {
	return Default(userdirs.Paths{Models: "/models", Sessions: "/sessions"})
}

func TestParseConfig(t *testing.T) {
	t.Setenv("PARLEY_TEST_MODELS", "/opt/models")
	tests := []struct {
		name    string
		yaml    string
		check   func(t *testing.T, c Config)
		wantErr string
	}{
		{name: "empty keeps the defaults", yaml: "", check: func(t *testing.T, c Config) {
			if c.LLM.Engine != "llama" || c.Dialogue.PromptFormat != "chatml" || !c.LLM.StreamClauses {
				t.Errorf("defaults lost: %+v", c.LLM)
			}
		}},
		{name: "durations and nested keys", yaml: "vad:\n  end_of_turn: 500ms\nturn_taking:\n  barge_in:\n    min_duration: 300ms\n    backchannels: [yeah]\n", check: func(t *testing.T, c Config) {
			if c.VAD.EndOfTurn != 500*time.Millisecond || c.TurnTaking.BargeIn.MinDuration != 300*time.Millisecond {
				t.Errorf("got %v and %v", c.VAD.EndOfTurn, c.TurnTaking.BargeIn.MinDuration)
			}
			if got := c.TurnTaking.BargeIn.Backchannels; len(got) != 1 || got[0] != "yeah" {
				t.Errorf("backchannels %v replace the defaults", got)
			}
			if c.TurnTaking.BargeIn.Grace == 0 {
				t.Error("unset keys of a set section keep their defaults")
			}
		}},
		{name: "variables and relative paths", yaml: "llm:\n  model: ${PARLEY_TEST_MODELS}/m.gguf\nvad:\n  model: silero.bin\n", check: func(t *testing.T, c Config) {
			if c.LLM.Model != "/opt/models/m.gguf" {
				t.Errorf("llm.model %q", c.LLM.Model)
			}
			if c.VAD.Model != "/etc/parley/silero.bin" {
				t.Errorf("vad.model %q: relative to the config's folder", c.VAD.Model)
			}
		}},
		{name: "http engine", yaml: "llm:\n  engine: http\n  url: http://127.0.0.1:8080\n", check: func(t *testing.T, c Config) {
			if c.LLM.Engine != "http" {
				t.Error(c.LLM.Engine)
			}
		}},
		{name: "unknown key", yaml: "llm:\n  modle: x.gguf\n", wantErr: "line 2: field modle not found"},
		{name: "wrong type", yaml: "vad:\n  threshold: loud\n", wantErr: "line 2"},
		{name: "unset variable", yaml: "llm:\n  model: ${PARLEY_NO_SUCH_VARIABLE}/m.gguf\n", wantErr: "unset variable"},
		{name: "unknown engine", yaml: "asr:\n  engine: kaldi\n", wantErr: "asr: engine \"kaldi\""},
		{name: "double talk without AEC3", yaml: "audio:\n  echo_engine: speex\n  echo_double_talk: true\n", wantErr: "needs the webrtc engine"},
		{name: "http without url", yaml: "llm:\n  engine: http\n", wantErr: "needs a url"},
		{name: "unknown prompt format", yaml: "dialogue:\n  prompt_format: nosuchformat\n", wantErr: "dialogue"},
		{name: "window without size", yaml: "dialogue:\n  memory:\n    strategy: window\n", wantErr: "window ≥ 1"},
		{name: "bad memory", yaml: "dialogue:\n  memory:\n    strategy: forget-everything\n", wantErr: "strategy \"forget-everything\""},
		{name: "negative durations", yaml: "turn_taking:\n  barge_in:\n    min_duration: -1s\n", wantErr: "must not be negative"},
		{name: "a negative rejoin", yaml: "turn_taking:\n  barge_in:\n    evidence:\n      rejoin: -1s\n", wantErr: "evidence.rejoin"},
		{name: "fraction out of range", yaml: "dialogue:\n  min_word_fraction: 2\n", wantErr: "min_word_fraction"},
		{name: "several errors at once", yaml: "asr:\n  engine: x\nllm:\n  engine: y\n", wantErr: "llm: engine \"y\""},
		{name: "not YAML", yaml: "{{{", wantErr: "invalid configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml), "/etc/parley", testBase(t))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("error %v, want ErrInvalidConfig mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestShippedConfigsLoad(t *testing.T) {
	t.Setenv("PARLEY_SHARED", "/shared")
	root := filepath.Join("..", "configs")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) != ".yaml" {
			continue
		}
		if _, err := Load(filepath.Join(root, e.Name()), testBase(t)); err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		}
	}
}

func TestPipelines(t *testing.T) {
	c := WithPipeline(testBase(t), TurnBased)
	if c.LLM.StreamClauses || c.ASR.Speculative || c.ASR.Hop < time.Hour || c.TurnTaking.Prepare.After != 0 {
		t.Errorf("turn-based config still incremental: %+v %+v %+v", c.LLM, c.ASR, c.TurnTaking.Prepare)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	c = WithPipeline(testBase(t), Incremental)
	if !c.LLM.StreamClauses || c.TurnTaking.Prepare.After != 0 {
		t.Errorf("incremental config prepares replies or waits for whole replies: %+v %+v", c.LLM, c.TurnTaking.Prepare)
	}
	c = WithPipeline(testBase(t), Predictive)
	if c.TurnTaking.Prepare.After == 0 || c.Pipeline != Predictive {
		t.Errorf("predictive config prepares nothing: %+v", c.TurnTaking.Prepare)
	}
	// The VAD reports a segment's end as the short hold (160 ms after the padded end,
	// 190 after Silero's) passes: at the end of the sixth whole window.
	if got := pipelineSettings(c).VAD.MergeGap; got != 192*time.Millisecond {
		t.Errorf("predictive merge gap %v, want 192ms", got)
	}
	if _, err := Parse([]byte("pipeline: telepathic\n"), "", testBase(t)); err == nil {
		t.Error("an unknown pipeline was accepted")
	}
	c, err := Parse([]byte("pipeline: incremental\n"), "", testBase(t))
	if err != nil || c.TurnTaking.Prepare.After != 0 {
		t.Errorf("pipeline: incremental in a file: %v, prepare %v", err, c.TurnTaking.Prepare)
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"", "llm:\n  engine: http\n  url: http://x\n", "vad:\n  end_of_turn: 500ms\n",
		"dialogue:\n  memory:\n    strategy: window\n    window: 3\n", "asr: [1, 2]\n", "audio: {input: 'USB', frame: 10ms}\n",
		"turn_taking:\n  barge_in:\n    backchannels: [yeah, okay]\n", "llm:\n  model: ${HOME}/x\n", "&a [*a]", "- - - -",
	} {
		f.Add(seed)
	}
	base := testBase(f)
	f.Fuzz(func(t *testing.T, data string) {
		// A parser of outside input must never hang; report the input if it does.
		watchdog := time.AfterFunc(5*time.Second, func() { panic(fmt.Sprintf("Parse hangs on %q", data)) })
		defer watchdog.Stop()
		c, err := Parse([]byte(data), "/etc/parley", base)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		// Whatever parses must validate: Parse never hands out a config that Build rejects
		// for its values.
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted a config that does not validate: %v", err)
		}
	})
}

func TestSessionPathIsNewForEachRun(t *testing.T) {
	cfg := testBase(t)
	cfg.Session.Dir = t.TempDir()
	seen := map[string]bool{}
	for range 3 {
		p, err := SessionPath(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("%s handed out twice", p)
		}
		seen[p] = true
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Session.Name = "mine"
	if p, err := SessionPath(cfg); err != nil || filepath.Base(p) != "mine" {
		t.Errorf("a named session: %q, %v", p, err)
	}
}

// TestCatalogModelNames: a model named as in 'agent models list' is the shared test
// assets' copy when they hold one, else the models folder's; anything else is a path.
func TestCatalogModelNames(t *testing.T) {
	shared, models := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(shared, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "models", "stories260K.gguf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PARLEY_MODELS", models)
	t.Setenv("PARLEY_SHARED", shared)
	yaml := []byte("llm:\n  model: stories260k\nvad:\n  model: silero-vad\nasr:\n  whisper:\n    model: ./whisper-tiny.en\n")
	c, err := Parse(yaml, "/etc/parley", testBase(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ key, got, want string }{
		{"llm.model", c.LLM.Model, filepath.Join(shared, "models", "stories260K.gguf")},
		{"vad.model", c.VAD.Model, filepath.Join(models, "ggml-silero-v6.2.0.bin")},
		{"asr.whisper.model", c.ASR.Whisper.Model, "/etc/parley/whisper-tiny.en"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.key, tc.got, tc.want)
		}
	}
	// Without shared test assets, every named model is the models folder's.
	t.Setenv("PARLEY_SHARED", "")
	t.Chdir(t.TempDir())
	if c, err = Parse(yaml, "/etc/parley", testBase(t)); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(models, "stories260K.gguf"); c.LLM.Model != want {
		t.Errorf("llm.model without shared assets: %q, want %q", c.LLM.Model, want)
	}
}
