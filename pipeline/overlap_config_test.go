package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/parley-voice/parley/turntaking"
)

func TestSoftBargeInConfig(t *testing.T) {
	c, err := Parse([]byte("turn_taking:\n  barge_in:\n    hold: pause\n    duck_gain: -18\n    language: de\n    evidence: {keyword_confidence: 0.9}\noverlap:\n  hop: 30ms\ndialogue:\n  show_backchannels: true\n"), "", testBase(t))
	if err != nil {
		t.Fatal(err)
	}
	b := c.TurnTaking.BargeIn
	if b.Hold != turntaking.HoldPause || b.DuckGain != -18 || b.Evidence.KeywordConfidence != 0.9 || c.Overlap.Hop != 30*time.Millisecond || !c.Dialogue.ShowBackchannels || !c.Overlap.Enabled {
		t.Errorf("parsed %+v, overlap %+v", b, c.Overlap)
	}
	backs, interrupts := b.WordLists()
	if len(backs) == 0 || interrupts[0] != "stopp" {
		t.Errorf("German word lists: %v, %v", backs, interrupts)
	}
	if c := WithPipeline(testBase(t), TurnBased); c.Overlap.Enabled || c.TurnTaking.BargeIn.Hold != turntaking.HoldPause {
		t.Errorf("the turn-based baseline keeps the overlap module (%v) or ducks (%q)", c.Overlap.Enabled, c.TurnTaking.BargeIn.Hold)
	}
	for _, bad := range []string{
		"turn_taking:\n  barge_in:\n    hold: whisper\n",
		"turn_taking:\n  barge_in:\n    duck_gain: 6\n",
		"turn_taking:\n  barge_in:\n    language: xx\n",
		"turn_taking:\n  barge_in:\n    evidence: {word_confidence: 2}\n",
		"overlap:\n  hop: 0s\n",
		"overlap:\n  max_sound: 10ms\n",
	} {
		if _, err := Parse([]byte(bad), "", testBase(t)); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: error %v", bad, err)
		}
	}
}
