package bench

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/source"
)

// TestScenarioWords aligns a scenario of two recordings: every word of their says:
// texts, in order, each within its recording's place on the timeline; "hey mycroft",
// whose second word the dictionary lacks, is spread over its sound.
func TestScenarioWords(t *testing.T) {
	hmm, _, _ := pocketsphinx.DefaultModel()
	if _, err := os.Stat(filepath.Join(hmm, "mdef")); err != nil {
		testenv.Missing(t, "the pocketsphinx en-us model", "install pocketsphinx-en-us; "+testenv.EnvFix)
	}
	what := testenv.SharedFile(t, "audio/v2j_what_time_is_it.wav")
	hey := testenv.SharedFile(t, "audio/v2j_hey_mycroft.wav")
	path := filepath.Join(t.TempDir(), "two.yaml")
	yaml := "tail: 1\nrecordings:\n  - file: " + what + "\n    says: What time is it?\n    at: 0.5\n  - file: " + hey + "\n    says: hey mycroft\n    at: 5\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	sc, err := source.LoadScenario(path)
	if err != nil {
		t.Fatal(err)
	}
	words, err := ScenarioWords(sc)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for i, w := range words {
		texts = append(texts, w.Text)
		at, limit := 500*time.Millisecond, 5*time.Second
		if i >= 4 {
			at, limit = 5*time.Second, 8*time.Second
		}
		if w.Start < at || w.End <= w.Start || w.End > limit || i > 0 && w.Start < words[i-1].End {
			t.Errorf("word %d %+v (after %+v): not within its recording in order", i, w, words[max(i-1, 0)])
		}
	}
	if got := strings.Join(texts, " "); got != "what time is it hey mycroft" {
		t.Errorf("words %q", got)
	}
	t.Logf("%+v", words)

	sc.Recordings[1].AfterPrevious = new(time.Duration)
	if _, err := ScenarioWords(sc); err == nil || !strings.Contains(err.Error(), "at:") {
		t.Errorf("a recording placed after another: error %v", err)
	}
}

// TestSpreadWords: words share the time by their letters, one after the other.
func TestSpreadWords(t *testing.T) {
	got := spreadWords([]string{"hey", "mycroft"}, time.Second, 2*time.Second)
	// 4 of 12 shares for "hey " and 8 for "mycroft ".
	split := time.Second + time.Second*4/12
	want := []SpokenWord{{"hey", time.Second, split}, {"mycroft", split, 2 * time.Second}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spreadWords = %+v, want %+v", got, want)
	}
}

// TestDictionaryWords: lower case, without punctuation, apostrophes kept.
func TestDictionaryWords(t *testing.T) {
	for in, want := range map[string]string{
		"What time is it?":       "what time is it",
		"Don't stop, Mr. Smith!": "don't stop mr smith",
		"  ":                     "",
	} {
		if got := strings.Join(dictionaryWords(in), " "); got != want {
			t.Errorf("dictionaryWords(%q) = %q, want %q", in, got, want)
		}
	}
}
