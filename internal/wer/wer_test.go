package wer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"And so, my fellow Americans: ask not!", []string{"and", "so", "my", "fellow", "americans", "ask", "not"}},
		{"Mr. Quilter's gospel.", []string{"mr", "quilter's", "gospel"}},
		{"cold-hearted  \t  don’t", []string{"cold", "hearted", "don't"}},
		{"'quoted' words'", []string{"quoted", "words"}},
		{"ÉCOLE Über 42", []string{"école", "über", "42"}},
		{"... --- !!!", nil},
	}
	for _, tc := range tests {
		if got := Normalize(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		ref, hyp      string
		sub, del, ins int
		rate          float64
	}{
		{"go forward ten meters", "go forward ten meters", 0, 0, 0, 0},
		{"go forward ten meters", "Go forward, ten meters.", 0, 0, 0, 0},
		{"go forward ten meters", "go forward ten years", 1, 0, 0, 0.25},
		{"go forward ten meters", "go forward meters", 0, 1, 0, 0.25},
		{"go forward ten meters", "go go forward ten meters", 0, 0, 1, 0.25},
		{"go forward ten meters", "", 0, 4, 0, 1},
		{"", "", 0, 0, 0, 0},
		{"", "noise", 0, 0, 1, 1},
		{"a b c d", "x a b c", 0, 1, 1, 0.5},
		{"he was not an ill disposed young man", "he was not an ill disposed young men", 1, 0, 0, 0.125},
	}
	for _, tc := range tests {
		r := Compare(tc.ref, tc.hyp)
		if r.Substitutions != tc.sub || r.Deletions != tc.del || r.Insertions != tc.ins || r.Rate() != tc.rate {
			t.Errorf("Compare(%q, %q) = %+v rate %g; want %d/%d/%d rate %g", tc.ref, tc.hyp, r, r.Rate(), tc.sub, tc.del, tc.ins, tc.rate)
		}
	}
	total := Compare("a b", "a").Add(Compare("c d e", "c d e f"))
	if total.RefWords != 5 || total.Errors() != 2 || total.Rate() != 0.4 {
		t.Errorf("total %+v", total)
	}
}

func TestReadTranscripts(t *testing.T) {
	in := "\ufefffile\ttranscript\tsource\tlicence\r\n" +
		"a.wav\tHello there.\tsomewhere\tMIT\r\n" +
		"\n" +
		"sub/b.wav\t  two words \n" +
		"c.wav\n"
	got, err := ReadTranscripts(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Transcript{
		{File: "a.wav", Text: "Hello there.", Source: "somewhere", Licence: "MIT"},
		{File: "sub/b.wav", Text: "two words"},
		{File: "c.wav"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// Columns may come in any order.
	got, err = ReadTranscripts(strings.NewReader("transcript\tfile\nhi\tx.wav\n"))
	if err != nil || len(got) != 1 || got[0].File != "x.wav" || got[0].Text != "hi" {
		t.Fatalf("reordered columns: %+v, %v", got, err)
	}
	for _, bad := range []string{
		"",
		"name\ttext\na.wav\thi\n",
		"file\nx.wav\n",
		"file\ttranscript\n\thi\n",
		"file\ttranscript\n../up.wav\thi\n",
		"file\ttranscript\n/etc/passwd\thi\n",
		"file\ttranscript\na/../../b.wav\thi\n",
	} {
		if _, err := ReadTranscripts(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadTranscripts(%q) succeeded", bad)
		}
	}
}

// TestTranscriptLimits: a line past 1 MiB and a file past MaxTranscriptsBytes are errors
// that say so.
func TestTranscriptLimits(t *testing.T) {
	long := "file\ttranscript\nx.wav\t" + strings.Repeat("a", 1<<20) + "\n"
	if _, err := ReadTranscripts(strings.NewReader(long)); err == nil || err.Error() != "transcripts: line 2: longer than 1 MiB, the limit for a line" {
		t.Errorf("a long line: %v", err)
	}
	path := filepath.Join(t.TempDir(), "transcripts.tsv")
	var b strings.Builder
	b.WriteString("file\ttranscript\n")
	for b.Len() <= MaxTranscriptsBytes {
		b.WriteString("x.wav\tsome words again\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTranscripts(path); err == nil || !strings.Contains(err.Error(), path+" is larger than 16 MiB, the limit for it") {
		t.Errorf("a large file: %v", err)
	}
}

func TestReadSharedTranscripts(t *testing.T) {
	path := testenv.SharedFile(t, "audio/transcripts.tsv")
	ts, err := LoadTranscripts(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) < 10 {
		t.Fatalf("only %d transcripts", len(ts))
	}
	for _, tr := range ts {
		if _, err := os.Stat(filepath.Join(filepath.Dir(path), tr.File)); err != nil {
			t.Errorf("%s: %v", tr.File, err)
		}
		if len(Normalize(tr.Text)) == 0 {
			t.Errorf("%s: empty transcript", tr.File)
		}
	}
}

func FuzzNormalize(f *testing.F) {
	f.Add("And so, my fellow Americans: ask not!")
	f.Add("don’t 'x' -- Ü\x00\xff")
	f.Fuzz(func(t *testing.T, s string) {
		words := Normalize(s)
		for _, w := range words {
			if w == "" || strings.ContainsAny(w, " \t\n.,!?-") || strings.HasPrefix(w, "'") || strings.HasSuffix(w, "'") {
				t.Fatalf("Normalize(%q) gave word %q", s, w)
			}
		}
		// Normalising normalised text changes nothing.
		if again := Normalize(strings.Join(words, " ")); !slices.Equal(again, words) {
			t.Fatalf("Normalize is not idempotent on %q: %q then %q", s, words, again)
		}
		// A text compared with itself has no errors.
		if r := Align(words, words); r.Errors() != 0 || r.RefWords != len(words) {
			t.Fatalf("self-alignment of %q: %+v", s, r)
		}
	})
}

func FuzzAlign(f *testing.F) {
	f.Add("a b c d", "x a b c")
	f.Fuzz(func(t *testing.T, ref, hyp string) {
		r, h := Normalize(ref), Normalize(hyp)
		res := Align(r, h)
		// Edit counts must be consistent with the two lengths.
		if res.RefWords != len(r) || len(r)-res.Deletions+res.Insertions != len(h) {
			t.Fatalf("Align(%q, %q) = %+v", r, h, res)
		}
		if e, lo, hi := res.Errors(), abs(len(r)-len(h)), max(len(r), len(h)); e < lo || e > hi {
			t.Fatalf("Align(%q, %q) = %d errors, outside [%d, %d]", r, h, e, lo, hi)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func FuzzReadTranscripts(f *testing.F) {
	f.Add("file\ttranscript\tsource\tlicence\na.wav\tHello.\ts\tl\n")
	f.Add("transcript\tfile\n\n\nhi\tx/y.wav\r\n")
	f.Fuzz(func(t *testing.T, in string) {
		ts, err := ReadTranscripts(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, tr := range ts {
			if tr.File == "" || !filepath.IsLocal(tr.File) {
				t.Fatalf("accepted file name %q", tr.File)
			}
		}
	})
}
