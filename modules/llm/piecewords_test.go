package llm

import (
	"strings"
	"testing"
)

// TestPieceWordsSpeakEveryPieceAsAWord: one word per piece, the same piece the same word,
// and a sentence end at the end.
func TestPieceWordsSpeakEveryPieceAsAWord(t *testing.T) {
	pieces := []string{"äs", "define", "irie", "irie", " sketch", "", "ete"}
	var a, b strings.Builder
	fa, fb := &PieceWords{}, &PieceWords{}
	for _, p := range pieces {
		a.WriteString(fa.Push(p))
		b.WriteString(fb.Push(p))
	}
	a.WriteString(fa.Flush())
	b.WriteString(fb.Flush())
	if a.String() != b.String() {
		t.Fatalf("not deterministic: %q vs %q", a.String(), b.String())
	}
	words := strings.Fields(strings.TrimSuffix(a.String(), "."))
	if len(words) != 6 {
		t.Fatalf("%q: want 6 words for 6 non-empty pieces", a.String())
	}
	if words[2] != words[3] {
		t.Errorf("the same piece gave %q and %q", words[2], words[3])
	}
	if !strings.HasSuffix(a.String(), ".") {
		t.Errorf("%q does not end a sentence", a.String())
	}
	if (&PieceWords{}).Flush() != "" {
		t.Error("an empty reply flushed text")
	}
}
