package pipeline

import (
	"errors"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// TestConfigRefusesBadValues: every refused value's error names its key and the range
// it must lie in.
func TestConfigRefusesBadValues(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want []string // the key and the range, as the error says them
	}{
		{"llm: {context: 2000000000}", []string{"context 2000000000", "0–1048576"}},
		{"llm: {context: -1}", []string{"context -1", "0–1048576"}},
		{"llm: {max_tokens: -1}", []string{"max_tokens -1", "0–1048576"}},
		{"llm: {temperature: .nan}", []string{"llm.temperature: NaN is not a finite number", "temperature NaN is not in range (want a finite number ≥ 0"}},
		{"llm: {temperature: .inf}", []string{"llm.temperature: +Inf is not a finite number"}},
		{"llm: {temperature: -0.5}", []string{"temperature -0.5", "a finite number ≥ 0"}},
		{"llm: {top_p: 1.5}", []string{"top_p 1.5", "want 0 to 1"}},
		{"llm: {min_p: .nan}", []string{"min_p NaN", "want 0 to 1"}},
		{"llm: {repeat_penalty: -.inf}", []string{"llm.repeat_penalty: -Inf is not a finite number"}},
		{"llm: {threads: -2}", []string{"threads -2", "0–"}},
		{"llm: {top_k: -1}", []string{"top_k -1"}},
		{"vad: {threshold: .nan}", []string{"vad.threshold: NaN is not a finite number", "threshold NaN is not in (0, 1]"}},
		{"vad: {threshold: 1.5}", []string{"threshold 1.5 is not in (0, 1]"}},
		{"vad: {threads: -1}", []string{"threads -1 must not be negative"}},
		{"end_of_turn: {complete_above: .nan}", []string{"end_of_turn.complete_above: NaN", "0 ≤ incomplete_below ≤ complete_above ≤ 1"}},
		{"dialogue: {min_word_fraction: .nan}", []string{"min_word_fraction NaN is not in [0, 1]"}},
		{"dialogue: {reply_reserve: -5}", []string{"reply_reserve -5 is not in 0–1048576"}},
		{"turn_taking: {barge_in: {duck_gain: .nan}}", []string{"duck_gain NaN dB (want -60 to 0)"}},
		{"turn_taking: {barge_in: {min_stability: 2}}", []string{"min_stability 2 (want 0 to 1)"}},
		{"turn_taking: {barge_in: {evidence: {word_confidence: .inf}}}", []string{"evidence.word_confidence +Inf (want 0 to 1)"}},
		{"tts: {rate: 5000}", []string{"rate 5000 is not in 80–450"}},
		{"tts: {volume: 999}", []string{"volume 999 is not in 0–200"}},
		{"asr: {whisper: {beam_size: 100}}", []string{"beam_size 100 is not in 0–8"}},
		{"asr: {pocketsphinx: {sample_rate: 100}}", []string{"sample_rate 100 Hz is not in 8000–48000"}},
		{"asr: {pocketsphinx: {max_hmms_per_frame: 10000000000}}", []string{"max_hmms_per_frame 10000000000 is not in 0–1000000"}},
		{"audio: {frame: 1h}", []string{"frame 1h0m0s is not in 0–1s"}},
		{"audio: {output_latency: 10h}", []string{"output_latency 10h0m0s is not in 0–2s"}},
		{"cores: -1", []string{"cores: -1 must not be negative"}},
		{"logging: {level: loud}", []string{"logging: logging: level: unrecognized level: \"loud\""}},
		{"logging: {modules: {asr: shout}}", []string{"logging: logging: module asr: unrecognized level: \"shout\""}},
		{"session: {name: \"a\\tb\\u001b[31m\"}", []string{"session.name", `"a\tb\x1b[31m"`, "1 to 64 of A–Z"}},
		{"session: {name: " + strings.Repeat("x", 300) + "}", []string{"session.name", "300 bytes long", "1 to 64"}},
	} {
		t.Run(tt.yaml, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml+"\n"), "/etc/parley", testBase(t))
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("accepted, or not as a config error: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestEveryFloatMustBeFinite sets each float of the configuration, one at a time, to
// NaN and to infinity: each is refused, by its YAML key.
func TestEveryFloatMustBeFinite(t *testing.T) {
	var keys []string
	var set func(v reflect.Value, key, target string, x float64) bool
	set = func(v reflect.Value, key, target string, x float64) bool {
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				f := v.Type().Field(i)
				name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if !f.IsExported() || name == "-" {
					continue
				}
				sub := key
				if !strings.Contains(opts, "inline") {
					sub = joinKey(key, name)
				}
				if set(v.Field(i), sub, target, x) {
					return true
				}
			}
		case reflect.Float32, reflect.Float64:
			if target == "" {
				keys = append(keys, key)
				return false
			}
			if key == target {
				v.SetFloat(x)
				return true
			}
		}
		return false
	}
	base := testBase(t)
	set(reflect.ValueOf(&base).Elem(), "", "", 0)
	if len(keys) < 15 {
		t.Fatalf("found only the floats %q", keys)
	}
	for _, key := range keys {
		for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			c := testBase(t)
			if !set(reflect.ValueOf(&c).Elem(), "", key, x) {
				t.Fatalf("%s not found", key)
			}
			err := c.Validate()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), key+": ") {
				t.Errorf("%s = %g: %v", key, x, err)
			}
		}
	}
}

// TestThreadsCappedAtTheCores: thread counts beyond the machine's logical CPUs are
// capped to them, and the plan says which.
func TestThreadsCappedAtTheCores(t *testing.T) {
	c := testBase(t)
	c.LLM.Threads, c.LLM.ThreadsBatch, c.ASR.Whisper.Threads, c.VAD.Threads, c.Cores = 100000, 100000, 100000, 100000, 100000
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	p := c.Threads()
	n := runtime.NumCPU()
	if p.LLM != n || p.LLMBatch != n || p.Whisper != n || p.VAD != n || p.Cores != n {
		t.Errorf("plan %+v, want every count capped at %d", p, n)
	}
	for _, key := range []string{"cores", "llm.threads", "llm.threads_batch", "asr.whisper.threads", "vad.threads"} {
		found := false
		for _, note := range p.Capped {
			found = found || strings.HasPrefix(note, key+" 100000 is more than the machine's")
		}
		if !found {
			t.Errorf("no note for %s in %q", key, p.Capped)
		}
	}
	if !strings.Contains(p.String(), "llm.threads 100000") {
		t.Errorf("the plan's line does not say what was capped: %s", p)
	}
	if p := testBase(t).Threads(); len(p.Capped) != 0 {
		t.Errorf("the defaults were capped: %q", p.Capped)
	}
}
