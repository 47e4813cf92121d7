package vad

import (
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestConfig(t *testing.T) {
	good := DefaultConfig()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	p := good.params()
	if p.negThreshold != 0.35 || p.minSpeech != 4000 || p.minSilence != 1600 || p.pad != 480 || p.mergeGap != 3200 {
		t.Fatalf("default params %+v", p)
	}
	// The 700 ms end of turn after the padded end (30 ms) is heard at the end of the
	// 23rd 32 ms window after the raw end: 706 ms.
	m, err := New("vad", good, &slowScorer{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.HeardSilence(good.EndOfTurn); got != 706*time.Millisecond {
		t.Errorf("HeardSilence(%v) = %v, want 706ms", good.EndOfTurn, got)
	}
	// A merge gap of 200 ms is heard at the end of the seventh window (224 ms), one of
	// 190 ms at the end of the sixth (192 ms): both are nearest six windows.
	for _, d := range []time.Duration{190 * time.Millisecond, 200 * time.Millisecond} {
		if got := NearestWindows(d, 512); got != 192*time.Millisecond {
			t.Errorf("NearestWindows(%v) = %v, want 192ms", d, got)
		}
	}
	for name, mod := range map[string]func(*Config){
		"zero threshold":       func(c *Config) { c.Threshold = 0 },
		"threshold above one":  func(c *Config) { c.Threshold = 1.5 },
		"neg above threshold":  func(c *Config) { c.NegThreshold = 0.9 },
		"negative min speech":  func(c *Config) { c.MinSpeech = -1 },
		"negative pad":         func(c *Config) { c.SpeechPad = -time.Millisecond },
		"no end of turn":       func(c *Config) { c.EndOfTurn = 0 },
		"negative end trim":    func(c *Config) { c.EndTrim = -time.Millisecond },
		"end trim of a second": func(c *Config) { c.EndTrim = time.Second },
	} {
		c := DefaultConfig()
		mod(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := New("vad", c, nil); err == nil {
			t.Errorf("%s: New accepted", name)
		}
	}
	// The config reads from YAML with durations as Go duration strings.
	var c Config
	in := "model: /m/silero.bin\nthreshold: 0.6\nmin_speech: 300ms\nmin_silence: 0.2s\nspeech_pad: 50ms\nmerge_gap: 250ms\nend_of_turn: 1s\n"
	if err := yaml.Unmarshal([]byte(in), &c); err != nil {
		t.Fatal(err)
	}
	want := Config{Model: "/m/silero.bin", Threshold: 0.6, MinSpeech: 300 * time.Millisecond, MinSilence: 200 * time.Millisecond,
		SpeechPad: 50 * time.Millisecond, MergeGap: 250 * time.Millisecond, EndOfTurn: time.Second}
	if c != want {
		t.Fatalf("YAML gave %+v, want %+v", c, want)
	}
}
