package shapemodels

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modelstore"
)

// small is quick to build (about a second): two layers of 64, the full 32k vocabulary.
var small = LLMShape{Name: "test-small", Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, FFN: 128}

// builder returns a Builder writing into a fresh directory, or reports the script's tools
// missing.
func builder(t *testing.T) Builder {
	t.Helper()
	testenv.Command(t, "llama-quantize", testenv.EnvFix)
	if err := exec.Command("python3", "-c", "import gguf, numpy").Run(); err != nil {
		testenv.Missing(t, "python3 with gguf and numpy", testenv.EnvFix)
	}
	return Builder{
		Script: filepath.Join(testenv.ModuleRoot(t), filepath.FromSlash(ScriptPath)),
		Dir:    t.TempDir(),
		Shared: testenv.SharedDir(t),
		Custom: []LLMShape{small},
		Log:    testLog{t},
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func byName(t *testing.T, models []Model) map[string]Model {
	t.Helper()
	out := map[string]Model{}
	for _, m := range models {
		if got := fileSHA256(t, m.Path); got != m.SHA256 {
			t.Errorf("%s: the script reported sha256 %s, the file has %s", m.Name, m.SHA256, got)
		}
		out[m.Name] = m
	}
	return out
}

func TestBuildIsDeterministicAndCached(t *testing.T) {
	ctx := context.Background()
	names := []string{small.Name, WhisperBaseEn}
	first := builder(t)
	a, err := first.Build(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	second := first
	second.Dir = t.TempDir()
	b, err := second.Build(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	byA, byB := byName(t, a), byName(t, b)
	for _, n := range names {
		ma, mb := byA[n], byB[n]
		if ma.SHA256 == "" || ma.SHA256 != mb.SHA256 {
			t.Errorf("%s: two builds differ: %s vs %s", n, ma.SHA256, mb.SHA256)
		}
		if ma.Cached() || mb.Cached() {
			t.Errorf("%s: fresh directories reported a cached file (%q, %q)", n, ma.Status, mb.Status)
		}
		if filepath.Dir(ma.Path) != first.Dir {
			t.Errorf("%s: written to %s, want it in %s", n, ma.Path, first.Dir)
		}
	}

	again, err := first.Build(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range again {
		if !m.Cached() || m.SHA256 != byA[m.Name].SHA256 {
			t.Errorf("%s: second run in the same directory: status %q, sha256 %s; want the cached file", m.Name, m.Status, m.SHA256)
		}
	}

	// A file whose bytes no longer match its stamp is rebuilt, to the same bytes.
	f, err := os.OpenFile(byA[small.Name].Path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rebuilt, err := first.Build(ctx, small.Name)
	if err != nil {
		t.Fatal(err)
	}
	if rebuilt[0].Cached() || rebuilt[0].SHA256 != byA[small.Name].SHA256 {
		t.Errorf("corrupted file: status %q, sha256 %s; want a rebuild to %s", rebuilt[0].Status, rebuilt[0].SHA256, byA[small.Name].SHA256)
	}
	entries, err := os.ReadDir(first.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && e.Name() != ".lock" {
			t.Errorf("left behind in the cache: %s", e.Name())
		}
	}
}

// llamaBench is the part of llama-bench's JSON output the test reads.
type llamaBench struct {
	ModelType string  `json:"model_type"`
	Params    int64   `json:"model_n_params"`
	NPrompt   int     `json:"n_prompt"`
	NGen      int     `json:"n_gen"`
	AvgTS     float64 `json:"avg_ts"`
}

func TestSmallShapeRunsInLlama(t *testing.T) {
	b := builder(t)
	bench := testenv.Command(t, "llama-bench", testenv.EnvFix)
	path, err := b.Ensure(context.Background(), small.Name)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bench, "-m", path, "-p", "16", "-n", "8", "-r", "1", "-t", "1", "-o", "json").Output()
	if err != nil {
		t.Fatalf("llama-bench: %v", err)
	}
	var runs []llamaBench
	if err := json.Unmarshal(out, &runs); err != nil {
		t.Fatalf("llama-bench output: %v\n%s", err, out)
	}
	if len(runs) != 2 {
		t.Fatalf("llama-bench reported %d runs, want prompt and generation", len(runs))
	}
	for _, r := range runs {
		if r.Params != small.Params() {
			t.Errorf("llama.cpp counts %d parameters, the shape has %d", r.Params, small.Params())
		}
		if !strings.Contains(r.ModelType, "Q4_K - Medium") {
			t.Errorf("model type %q, want Q4_K_M", r.ModelType)
		}
		if r.AvgTS <= 0 {
			t.Errorf("pp%d tg%d: %v tokens/s", r.NPrompt, r.NGen, r.AvgTS)
		}
	}
}

func TestWhisperShapeLoadsAndComputes(t *testing.T) {
	b := builder(t)
	cli := testenv.Command(t, "whisper-cli", testenv.EnvFix)
	audio := testenv.SharedFile(t, "audio/jfk.wav")
	path, err := b.Ensure(context.Background(), WhisperBaseEn)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Magic                                                uint32
		Vocab, AudioCtx, AudioState, AudioHead, AudioLayer   int32
		TextCtx, TextState, TextHead, TextLayer, Mels, FType int32
	}
	if _, err := binary.Decode(data, binary.LittleEndian, &h); err != nil {
		t.Fatal(err)
	}
	if h.AudioState != 512 || h.AudioHead != 8 || h.AudioLayer != 6 || h.TextState != 512 || h.TextHead != 8 || h.TextLayer != 6 {
		t.Errorf("header %+v, want base.en's 512 state, 8 heads, 6 layers", h)
	}
	// A short encoder window (-ac), 2 s of audio and greedy decoding without fallbacks keep
	// this quick; whisper-bench measures the full cost.
	out, err := exec.Command(cli, "-m", path, "-f", audio, "-ac", "64", "-d", "2000", "-bs", "1", "-bo", "1", "-nf", "-t", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("whisper-cli: %v\n%s", err, out)
	}
	log := string(out)
	for _, want := range []string{"n_audio_state = 512", "(base)", "encode time", "decode time"} {
		if !strings.Contains(log, want) {
			t.Errorf("whisper-cli's log lacks %q:\n%s", want, log)
		}
	}
	// Every byte after the test file's header is tensor data whisper.cpp loaded (less the
	// tensors' names and dimensions).
	header, err := os.Stat(filepath.Join(b.Shared, filepath.FromSlash("models/ggml-tiny.en-for-tests.bin")))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`model size\s*=\s*([0-9.]+) MB`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("whisper-cli's log has no model size:\n%s", log)
	}
	loaded, _ := strconv.ParseFloat(m[1], 64)
	if tensors := float64(len(data)-int(header.Size())) / 1e6; loaded < 0.99*tensors || loaded > tensors {
		t.Errorf("whisper.cpp loaded %.2f MB of weights, the file holds %.2f MB after the header", loaded, tensors)
	}
}

// TestShapesMatchRealModelSizes builds the default LLM and whisper shapes in the shared
// cache (so a later bench reuses them) and compares their sizes with the real files'.
func TestShapesMatchRealModelSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the 0.5B shape (about 15 s)")
	}
	b := builder(t)
	b.Dir = "" // the default cache
	for _, tc := range []struct {
		shape string
		slack float64 // allowed relative size difference
	}{
		// Qwen's merges list and q/k/v biases are not in the shape: 0.5 % smaller.
		{Qwen25_05B, 0.01},
		// Same tensors byte for byte; the test file's header section is a few hundred bytes longer.
		{WhisperBaseEn, 1e-5},
	} {
		path, err := b.Ensure(context.Background(), tc.shape)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := modelstore.Builtin().Find(Imitates(tc.shape))
		if err != nil {
			t.Fatal(err)
		}
		if diff := math.Abs(float64(st.Size()-want.Size)) / float64(want.Size); diff > tc.slack {
			t.Errorf("%s: %d bytes, the real %s has %d (%.2f %% apart, allowed %.2f %%)", tc.shape, st.Size(), want.Name, want.Size, 100*diff, 100*tc.slack)
		}
		t.Logf("%s: %d bytes; real %s: %d", tc.shape, st.Size(), want.File, want.Size)
	}
}

func TestLLMShapeSpec(t *testing.T) {
	for _, tc := range []struct {
		shape LLMShape
		want  string // "" = an error
	}{
		{small, "test-small:hidden=64,layers=2,heads=4,kv_heads=2,ffn=128"},
		{LLMShape{Name: "v", Hidden: 8, Layers: 1, Heads: 2, KVHeads: 1, FFN: 16, Vocab: 40000, Context: 512}, "v:hidden=8,layers=1,heads=2,kv_heads=1,ffn=16,vocab=40000,ctx=512"},
		{LLMShape{Name: "Bad Name", Hidden: 8, Layers: 1, Heads: 2, KVHeads: 1, FFN: 16}, ""},
		{LLMShape{Name: "x:y", Hidden: 8, Layers: 1, Heads: 2, KVHeads: 1, FFN: 16}, ""},
		{LLMShape{Name: "zero", Layers: 1, Heads: 2, KVHeads: 1, FFN: 16}, ""},
	} {
		got, err := tc.shape.spec()
		if tc.want == "" {
			if err == nil {
				t.Errorf("%+v: spec %q, want an error", tc.shape, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%+v: spec %q, %v; want %q", tc.shape, got, err, tc.want)
		}
	}
}

func TestParseOutput(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	models, err := parseOutput("a\t/x/a.gguf\t" + sum + "\tcached\nwhisper-base.en\t/x/w.bin\t" + sum + "\tbuilt\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 2 || !models[0].Cached() || models[1].Cached() || models[1].Path != "/x/w.bin" {
		t.Errorf("parsed %+v", models)
	}
	for _, bad := range []string{
		"",
		"a\t/x/a.gguf\t" + sum,
		"a\trelative.gguf\t" + sum + "\tcached",
		"a\t/x/a.gguf\t" + strings.Repeat("AB", 32) + "\tcached",
		"A\t/x/a.gguf\t" + sum + "\tcached",
		"a\t/x/a.gguf\t" + sum + "\t",
	} {
		if m, err := parseOutput(bad); err == nil {
			t.Errorf("parseOutput(%q) = %+v, want an error", bad, m)
		}
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add("qwen2.5-0.5b\t/c/q.gguf\t" + strings.Repeat("0", 64) + "\tbuilt in 12.1 s")
	f.Add("a\tb\tc\td\te")
	f.Fuzz(func(t *testing.T, line string) {
		m, err := parseLine(line)
		if err != nil {
			return
		}
		if !filepath.IsAbs(m.Path) || len(m.SHA256) != 64 || m.Status == "" || !nameRE.MatchString(m.Name) {
			t.Errorf("parseLine(%q) accepted %+v", line, m)
		}
	})
}
