package ellipsis

import (
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"héllo", 2, "hé…"},
		{"héllo", 5, "héllo"},
		{"日本語テキスト", 3, "日本語…"},
		{"abc", 0, "…"},
		{"abc", -1, "…"},
	}
	for _, tt := range tests {
		if got := Cut(tt.s, tt.n); got != tt.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func FuzzCut(f *testing.F) {
	f.Add("héllo wörld", 4)
	f.Add("\xff\xfeabc", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n % 100
		got := Cut(s, n)
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Cut(%q, %d) = %q: invalid UTF-8 from valid input", s, n, got)
		}
		if got != s && utf8.RuneCountInString(got) != max(n, 0)+1 {
			t.Fatalf("Cut(%q, %d) = %q: %d runes", s, n, got, utf8.RuneCountInString(got))
		}
	})
}
