package llm

import (
	"strings"
	"unicode/utf8"
)

// TextStream turns an engine's raw token pieces into text that is safe to emit: it
// holds back the bytes of a UTF-8 character split across tokens, and any tail that could
// be the start of a stop string, and cuts the text where a stop string appears. Engines
// use it to honour Request.Stop the same way.
//
// A stop string ends generation as soon as it is complete. When several complete in the
// same piece, the one that ends first wins (ties: the one that starts first), so the
// result does not depend on how the text was split into pieces.
type TextStream struct {
	stops   []string
	pending string // received, not emitted yet
	emitted strings.Builder
	stopped bool
}

// NewTextStream returns a stream that cuts at stops. It ignores empty stop strings and ones that are not valid UTF-8 (which
// could match inside a character).
func NewTextStream(stops []string) *TextStream {
	s := &TextStream{}
	for _, st := range stops {
		if st != "" && utf8.ValidString(st) {
			s.stops = append(s.stops, st)
		}
	}
	return s
}

// Push adds a piece and returns the text that can be emitted now, and whether a stop
// string was found (after which push does nothing).
func (s *TextStream) Push(piece string) (emit string, stop bool) {
	if s.stopped {
		return "", true
	}
	buf := s.pending + piece
	if cut, ok := s.firstStop(buf); ok {
		s.stopped = true
		s.pending = ""
		return s.out(buf[:cut]), true
	}
	hold := s.holdBack(buf)
	s.pending = buf[len(buf)-hold:]
	return s.out(buf[:len(buf)-hold]), false
}

// Flush returns what is still held back when generation ended without a stop string. A
// character left incomplete by the model is dropped.
func (s *TextStream) Flush() string {
	if s.stopped {
		return ""
	}
	rest := s.pending
	s.pending = ""
	return s.out(rest)
}

// Text returns everything emitted so far.
func (s *TextStream) Text() string { return s.emitted.String() }

// out sanitises text for emission (models can produce invalid byte sequences) and
// records it.
func (s *TextStream) out(t string) string {
	if !utf8.ValidString(t) {
		t = strings.ToValidUTF8(t, "")
	}
	s.emitted.WriteString(t)
	return t
}

// firstStop returns where the stop string that completes first in buf starts.
func (s *TextStream) firstStop(buf string) (int, bool) {
	bestStart, bestEnd := -1, -1
	for _, st := range s.stops {
		i := strings.Index(buf, st)
		if i < 0 {
			continue
		}
		end := i + len(st)
		if bestEnd < 0 || end < bestEnd || (end == bestEnd && i < bestStart) {
			bestStart, bestEnd = i, end
		}
	}
	return bestStart, bestStart >= 0
}

// holdBack returns how many bytes at the end of buf must wait for more text: the
// longest tail that is a proper prefix of a stop string, or at least an incomplete
// UTF-8 character.
func (s *TextStream) holdBack(buf string) int {
	hold := 0
	for _, st := range s.stops {
		for n := min(len(st)-1, len(buf)); n > hold; n-- {
			if strings.HasPrefix(st, buf[len(buf)-n:]) {
				hold = n
				break
			}
		}
	}
	// An incomplete character at the end of what would be emitted waits too.
	head := buf[:len(buf)-hold]
	for i := 1; i <= utf8.UTFMax-1 && i <= len(head); i++ {
		c := head[len(head)-i]
		if utf8.RuneStart(c) {
			if !utf8.FullRuneInString(head[len(head)-i:]) {
				hold += i
			}
			break
		}
	}
	return hold
}
