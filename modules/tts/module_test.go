package tts

import (
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestConfig(t *testing.T) {
	var cfg Config
	src := "voice: en-gb\nrate: 200\npitch: 40\nvolume: 120\nchunk_duration: 30ms\nmin_pause: 80ms\n"
	if err := yaml.Unmarshal([]byte(src), &cfg); err != nil {
		t.Fatal(err)
	}
	want := Config{Voice: "en-gb", Rate: 200, Pitch: 40, Volume: 120, ChunkDuration: 30 * time.Millisecond, MinPause: 80 * time.Millisecond}
	if cfg != want {
		t.Fatalf("decoded %+v", cfg)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Config{{ChunkDuration: 0}, {ChunkDuration: 50 * time.Millisecond}, {ChunkDuration: 20 * time.Millisecond, MinPause: -1}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := New("tts", Config{ChunkDuration: time.Second}, nil); err == nil {
		t.Error("New accepted a bad config")
	}
}
