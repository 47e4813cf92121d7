// Package ellipsis shortens text for summaries, log lines and labels.
package ellipsis

import "unicode/utf8"

// Cut returns s when it has at most n characters (runes), and otherwise its first n
// characters followed by "…". It never splits a character.
func Cut(s string, n int) string {
	if n < 0 {
		n = 0
	}
	if len(s) <= n || utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i] + "…"
}
