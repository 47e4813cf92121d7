package asr

import (
	"slices"
	"testing"

	"github.com/parley-voice/parley/iu"
)

func TestWordList(t *testing.T) {
	word := func(id, text string, stability float32) iu.IU {
		return iu.IU{ID: iu.ID(id), Payload: Word{Text: text, Stability: stability}}
	}
	texts := func(l *WordList) []string {
		var out []string
		for _, w := range l.Words() {
			out = append(out, w.Text)
		}
		return out
	}
	var l WordList
	steps := []struct {
		up      iu.Update
		applied bool
		want    []string
	}{
		{iu.AddOf(word("asr/1", "go", 0.5)), true, []string{"go"}},
		{iu.AddOf(word("asr/2", "fur", 0.5)), true, []string{"go", "fur"}},
		{iu.UpdateOf(word("asr/2", "fur", 0.5), Word{Text: "for", Stability: 0.5}), true, []string{"go", "for"}},
		{iu.RevokeOf(word("asr/2", "for", 0.5)), true, []string{"go"}},
		{iu.AddOf(word("asr/3", "forward", 0.5)), true, []string{"go", "forward"}},
		{iu.CommitOf(word("asr/1", "go", 0.5)), true, []string{"go", "forward"}},
		{iu.AddOf(iu.IU{ID: "vad/1", Payload: Utterance{Text: "x"}}), false, []string{"go", "forward"}},
	}
	for i, s := range steps {
		if got := l.Apply(s.up); got != s.applied {
			t.Fatalf("step %d: Apply = %v", i, got)
		}
		if got := texts(&l); !slices.Equal(got, s.want) {
			t.Fatalf("step %d: words %q, want %q", i, got, s.want)
		}
	}
	if w := l.Words(); w[0].Stability != 1 || w[1].Stability != 0.5 || l.Len() != 2 {
		t.Errorf("stabilities %v, %v (committed words count as stable)", w[0].Stability, w[1].Stability)
	}
	l.Reset()
	if l.Len() != 0 {
		t.Errorf("%d words after Reset", l.Len())
	}
}
