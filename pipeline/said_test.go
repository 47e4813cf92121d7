package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio/voices"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/source"
)

// TestMakeRecordingsCutsASentence: the parts of a sentence are made by cutting the
// sentence the voice spoke whole; they join into it, each holds its words' speech, and
// recordings.json names the sentence and the part.
func TestMakeRecordingsCutsASentence(t *testing.T) {
	for _, p := range []string{"flite", "sox", "pocketsphinx"} {
		testenv.Command(t, p, testenv.EnvFix)
	}
	cacheDir := filepath.Join(t.TempDir(), "voices")
	t.Setenv(voices.CacheEnv, cacheDir)
	sc, err := source.ParseScenario([]byte(`recordings:
  - sentence: "pack a hat, | a scarf, | and warm gloves"
    part: 1
    voice: flite:kal
    at: 0.5
    event: pause
  - sentence: "pack a hat, | a scarf, | and warm gloves"
    part: 2
    voice: flite:kal
    after_previous: 600ms
    event: pause
  - sentence: "pack a hat, | a scarf, | and warm gloves"
    part: 3
    voice: flite:kal
    after_previous: 400ms
    event: turn-end
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := MakeRecordings(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	cache, err := voices.OpenCache(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := cache.Sentence(context.Background(), voices.Voice{Engine: "flite", Name: "kal"}, "pack a hat, a scarf, and warm gloves")
	if err != nil {
		t.Fatal(err)
	}
	var joined []float32
	var placed []source.Placement
	for i, r := range sc.Recordings {
		part, err := voices.Load(r.File)
		if err != nil {
			t.Fatal(err)
		}
		if on, off := voices.Bounds(part); off-on < voices.Rate/10 {
			t.Errorf("part %d (%q) holds %d samples of speech", i+1, r.Says, off-on)
		}
		joined = append(joined, part...)
		placed = append(placed, source.Placement{Index: i, Start: time.Duration(i+1) * time.Second, How: source.PlacedAt})
	}
	if !slices.Equal(joined, whole.Samples) {
		t.Errorf("the parts (%d samples) do not join into the sentence (%d)", len(joined), len(whole.Samples))
	}
	path := filepath.Join(t.TempDir(), RecordingsFile)
	if err := writeRecordings(path, sc, placed); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var played []PlayedRecording
	if err := json.Unmarshal(data, &played); err != nil {
		t.Fatal(err)
	}
	for i, p := range played {
		if p.Sentence != "pack a hat, a scarf, and warm gloves" || p.Part != i+1 || p.Says != []string{"pack a hat,", "a scarf,", "and warm gloves"}[i] ||
			p.SpeechEnd <= p.SpeechStart {
			t.Errorf("recordings.json, recording %d: %+v", i, p)
		}
	}
}
