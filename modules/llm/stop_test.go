package llm

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// runStream pushes pieces and returns what was emitted per push, and whether it stopped.
func runStream(stops []string, pieces ...string) (emitted []string, stopped bool, total string) {
	s := NewTextStream(stops)
	for _, p := range pieces {
		out, stop := s.Push(p)
		if out != "" {
			emitted = append(emitted, out)
		}
		if stop {
			return emitted, true, s.Text()
		}
	}
	if out := s.Flush(); out != "" {
		emitted = append(emitted, out)
	}
	return emitted, false, s.Text()
}

func TestTextStream(t *testing.T) {
	tests := []struct {
		name    string
		stops   []string
		pieces  []string
		emitted []string // what each push (and the final flush) emitted, empty ones left out
		stopped bool
	}{
		{"no stops", nil, []string{"Hello", " world"}, []string{"Hello", " world"}, false},
		{"stop inside a piece", []string{"\nUser:"}, []string{"Hi there.\nUser: bye"}, []string{"Hi there."}, true},
		{"stop split across pieces", []string{"\nUser:"}, []string{"Hi.", "\n", "Us", "er", ": no"}, []string{"Hi."}, true},
		{"false start released", []string{"\nUser:"}, []string{"Hi.", "\n", "Us", "ually"}, []string{"Hi.", "\nUsually"}, false},
		{"held prefix flushed at end", []string{"\nUser:"}, []string{"Hi.", "\nUs"}, []string{"Hi.", "\nUs"}, false},
		{"stop at start", []string{"User:"}, []string{"User: hello"}, nil, true},
		{"first completed wins", []string{"abcd", "bc"}, []string{"xab", "cd"}, []string{"x", "a"}, true},
		{"same end, earlier start wins", []string{"bc", "abc"}, []string{"xabc"}, []string{"x"}, true},
		{"multibyte split", nil, []string{"caf\xc3", "\xa9 ok"}, []string{"caf", "é ok"}, false},
		{"four-byte split three ways", nil, []string{"a\xf0\x9f", "\x99", "\x82b"}, []string{"a", "🙂b"}, false},
		{"multibyte stop", []string{"。用户"}, []string{"好的", "。用", "户：你好"}, []string{"好的"}, true},
		{"invalid bytes dropped", nil, []string{"a\xffb"}, []string{"ab"}, false},
		{"incomplete character at end dropped", nil, []string{"ab\xe2\x82"}, []string{"ab"}, false},
		{"empty stop ignored", []string{""}, []string{"abc"}, []string{"abc"}, false},
		{"invalid UTF-8 stop ignored", []string{"\x9d"}, []string{"\uf772"}, []string{"\uf772"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			emitted, stopped, total := runStream(tc.stops, tc.pieces...)
			if strings.Join(emitted, "|") != strings.Join(tc.emitted, "|") || stopped != tc.stopped {
				t.Errorf("emitted %q stopped %v, want %q stopped %v", emitted, stopped, tc.emitted, tc.stopped)
			}
			if total != strings.Join(tc.emitted, "") {
				t.Errorf("text() = %q, want %q", total, strings.Join(tc.emitted, ""))
			}
		})
	}
}

func TestTextStreamAfterStop(t *testing.T) {
	s := NewTextStream([]string{"STOP"})
	if out, stop := s.Push("abSTOPcd"); out != "ab" || !stop {
		t.Fatalf("push = %q, %v", out, stop)
	}
	if out, stop := s.Push("more"); out != "" || !stop {
		t.Errorf("push after stop = %q, %v", out, stop)
	}
	if out := s.Flush(); out != "" {
		t.Errorf("flush after stop = %q", out)
	}
}

func FuzzTextStream(f *testing.F) {
	f.Add("Hello.\nUser: hi", "\nUser:", "", uint64(1))
	f.Add("caf\xc3\xa9 \xf0\x9f\x99\x82 done", "é", "🙂", uint64(2))
	f.Add("abcabd", "abd", "ca", uint64(3))
	f.Add("a\xffb\xe2\x82", "b", "", uint64(4))
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, seed uint64) {
		// Stop strings are short in practice; holdBack is quadratic in their length.
		if len(text) > 1<<12 || len(stop1) > 64 || len(stop2) > 64 {
			return
		}
		stops := []string{stop1, stop2}
		rng := rand.New(rand.NewPCG(seed, 11))
		var pieces []string
		for rest := text; rest != ""; {
			n := 1 + rng.IntN(min(len(rest), 8))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		emitted, stopped, total := runStream(stops, pieces...)
		for _, e := range emitted {
			if !utf8.ValidString(e) {
				t.Fatalf("emitted invalid UTF-8 %q", e)
			}
		}
		if strings.Join(emitted, "") != total {
			t.Fatalf("emitted %q but text() = %q", emitted, total)
		}
		// The outcome does not depend on the pieces: compare with the whole text at once.
		_, wholeStopped, wholeTotal := runStream(stops, text)
		if stopped != wholeStopped || total != wholeTotal {
			t.Fatalf("pieces %q: %q stopped %v; whole text: %q stopped %v", pieces, total, stopped, wholeTotal, wholeStopped)
		}
		if !utf8.ValidString(text) {
			return
		}
		s := NewTextStream(stops)
		want := text
		if cut, ok := s.firstStop(text); ok {
			want = text[:cut]
		}
		if total != want {
			t.Fatalf("text %q stops %q: got %q, want %q", text, stops, total, want)
		}
		for _, st := range s.stops {
			if strings.Contains(total, st) {
				t.Fatalf("emitted text %q contains stop %q", total, st)
			}
		}
	})
}
