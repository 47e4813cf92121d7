package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/shapemodels"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestBenchRealistic runs 'agent bench --realistic' on one question with the 0.5B shape
// of the 32k vocabulary (built into the user's cache the first time, under a minute):
// bench.json says the LLM was the shape, and holds the latencies, the CPU per module,
// the thread plan and the core count.
func TestBenchRealistic(t *testing.T) {
	question := testenv.SharedFile(t, "audio/v2j_what_time_is_it.wav")
	testenv.Command(t, "pocketsphinx", testenv.EnvFix)
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	scenario := oneQuestion(t, tmp, question)
	out := filepath.Join(tmp, "bench")
	env := userEnv(t, t.TempDir(), "PARLEY_SHAPE_MODELS_DIR="+filepath.Join(cache, "parley", "shape-models"))
	code, stdout, stderr := runAgentBinary(t, env, 5*time.Minute, "bench", "--realistic", "--shape", shapemodels.Qwen25_05BVocab32k,
		"-n", "1", "--pipeline", "predictive", "-o", out, scenario)
	if code != 0 {
		t.Fatalf("agent bench --realistic: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"predictive", "voice_to_voice", "CPU per second of audio", "speaker underruns: ", "threads: "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}
	var report struct {
		Realistic bool
		Shape     string
		Machine   struct{ Cores int }
		Models    map[string]string
		Modes     map[string]map[string]json.RawMessage
		CPU       map[string]struct {
			Process float64            `json:"process_cpu_per_s"`
			Modules map[string]float64 `json:"module_cpu_per_s"`
		}
		Underruns map[string]int64   `json:"speaker_underruns"`
		VADLag    map[string]float64 `json:"vad_max_lag_ms"`
	}
	data := readBenchJSON(t, out, &report)
	if !report.Realistic || report.Shape != shapemodels.Qwen25_05BVocab32k || !strings.Contains(report.Models["llm"], "qwen2.5-0.5b") {
		t.Errorf("bench.json does not say the LLM was the shape: realistic %v, shape %q, llm %q", report.Realistic, report.Shape, report.Models["llm"])
	}
	if report.Machine.Cores < 1 {
		t.Errorf("no core count: %+v", report.Machine)
	}
	if _, ok := report.Modes["predictive"]["voice_to_voice"]; !ok {
		t.Errorf("no voice-to-voice for the predictive pipeline: %s", data)
	}
	// Counted, not judged: a loaded test machine may starve the output (the quiet
	// machine's figure is in docs/PERFORMANCE.md).
	if n, ok := report.Underruns["predictive"]; !ok {
		t.Errorf("bench.json does not count speaker underruns: %s", data)
	} else {
		t.Logf("speaker underruns: %d", n)
	}
	if lag, ok := report.VADLag["predictive"]; !ok || lag <= 0 {
		t.Errorf("bench.json does not say how far the VAD fell behind (%v, %v): %s", lag, ok, data)
	}
	cpu := report.CPU["predictive"]
	if cpu.Process <= 0 || cpu.Modules["llm"] <= 0 || cpu.Modules["asr"] <= 0 {
		t.Errorf("CPU per module missing: %+v", cpu)
	}
}

// readBenchJSON decodes the bench.json 'agent bench' wrote into dir, and returns it.
func readBenchJSON(t *testing.T, dir string, v any) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestBenchRealisticWhisper runs 'agent bench --realistic --asr whisper' on one question:
// a model of whisper tiny.en's shape (built into the user's cache the first time) in the
// loop at its real cost, the words from the scenario's says: text. bench.json says so,
// with a voice-to-voice time: the user's turn had words.
func TestBenchRealisticWhisper(t *testing.T) {
	question := testenv.SharedFile(t, "audio/v2j_what_time_is_it.wav")
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	scenario := filepath.Join(tmp, "one.yaml")
	if err := os.WriteFile(scenario, []byte("tail: 3\nrecordings:\n  - file: "+question+"\n    says: what time is it\n    at: 0.3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "bench")
	env := userEnv(t, t.TempDir(), "PARLEY_SHAPE_MODELS_DIR="+filepath.Join(cache, "parley", "shape-models"))
	code, stdout, stderr := runAgentBinary(t, env, 5*time.Minute, "bench", "--realistic", "--asr", "whisper", "--shape", shapemodels.Qwen25_05BVocab32k,
		"-n", "1", "--pipeline", "predictive", "-o", out, scenario)
	if code != 0 {
		t.Fatalf("agent bench --realistic --asr whisper: exit %d\n%s%s", code, stdout, stderr)
	}
	var report struct {
		ASRShape string `json:"asr_shape"`
		Models   map[string]string
		Modes    map[string]map[string]json.RawMessage
		CPU      map[string]struct {
			Modules map[string]float64 `json:"module_cpu_per_s"`
		}
	}
	data := readBenchJSON(t, out, &report)
	if report.ASRShape != shapemodels.WhisperTinyEn || !strings.Contains(report.Models["asr"], "whisper") {
		t.Errorf("bench.json does not say the recogniser was whisper's shape: asr_shape %q, asr %q", report.ASRShape, report.Models["asr"])
	}
	if _, ok := report.Modes["predictive"]["voice_to_voice"]; !ok {
		t.Errorf("no voice-to-voice for the predictive pipeline: %s", data)
	}
	if report.CPU["predictive"].Modules["asr"] <= 0 {
		t.Errorf("the recogniser cost nothing: %s", data)
	}
	if !strings.Contains(stdout, "asr: the shape of "+shapemodels.WhisperTinyEn) {
		t.Errorf("the table does not say the recogniser's shape:\n%s", stdout)
	}
	for _, bad := range [][]string{{"--asr", "whisper"}, {"--realistic", "--asr", "whisper", "--live"}, {"--realistic", "--asr", "vosk"}} {
		if code, _, stderr := runAgentBinary(t, env, time.Minute, append(append([]string{"bench"}, bad...), scenario)...); code != 2 || !strings.Contains(stderr, "--") {
			t.Errorf("agent bench %s: exit %d, %s", strings.Join(bad, " "), code, stderr)
		}
	}
}
