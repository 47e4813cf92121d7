package normalize

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// spokenWords splits the spoken text at white space and maps each word back.
func spokenWords(t Text) [][2]string {
	var out [][2]string
	s := t.Spoken
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unicode.IsSpace(r) {
			i += size
			continue
		}
		j := i
		for j < len(s) {
			r, size := utf8.DecodeRuneInString(s[j:])
			if unicode.IsSpace(r) {
				break
			}
			j += size
		}
		a, b := t.Span(i, j)
		out = append(out, [2]string{s[i:j], t.Original[a:b]})
		i = j
	}
	return out
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		in, spoken string
		// maps lists spoken words (first occurrence) and the original text each maps to.
		maps [][2]string
	}{
		{"Hello, world.", "Hello, world.", [][2]string{{"Hello,", "Hello,"}, {"world.", "world."}}},
		{"It costs 3.5 euros.", "It costs three point five euros.",
			[][2]string{{"three", "3.5"}, {"point", "3.5"}, {"five", "3.5"}, {"euros.", "euros."}}},
		{"café 42", "café forty two", [][2]string{{"café", "café"}, {"forty", "42"}, {"two", "42"}}},
		{"1,000 people", "one thousand people", [][2]string{{"thousand", "1,000"}}},
		{"1,234,567", "one million two hundred thirty four thousand five hundred sixty seven", nil},
		{"-5 degrees", "minus five degrees", [][2]string{{"minus", "-5"}, {"five", "-5"}}},
		{"It fell −2.5%", "It fell minus two point five percent", [][2]string{{"percent", "−2.5%"}}},
		{"50% off", "fifty percent off", [][2]string{{"percent", "50%"}}},
		{"$5", "five dollars", [][2]string{{"dollars", "$5"}}},
		{"$1 each", "one dollar each", nil},
		{"$3.50.", "three dollars and fifty cents.", [][2]string{{"cents.", "$3.50."}}},
		{"$0.99", "ninety nine cents", nil},
		{"€1,234.56", "one thousand two hundred thirty four euros and fifty six cents", nil},
		{"£2.5 million", "two point five million pounds", [][2]string{{"million", "£2.5 million"}}},
		{"$5k", "five thousand dollars", nil},
		{"¥300", "three hundred yen", nil},
		{"the 1st and 22nd and 3rd and 4th", "the first and twenty second and third and fourth", [][2]string{{"second", "22nd"}}},
		{"the 100th time", "the one hundredth time", nil},
		{"the 20th century", "the twentieth century", nil},
		{"in 1999 and 2005 and 2024 and 1900", "in nineteen ninety nine and two thousand five and twenty twenty four and nineteen hundred", nil},
		{"in 1905", "in nineteen oh five", nil},
		{"the 1990s and 80s", "the nineteen nineties and eighties", [][2]string{{"nineties", "1990s"}}},
		{"3000 and 12345", "three thousand and twelve thousand three hundred forty five", nil},
		{"at 7:30 p.m. today", "at seven thirty p m today", [][2]string{{"m", "7:30 p.m."}}},
		{"at 9:05am", "at nine oh five a m", nil},
		{"at 10:00", "at ten o'clock", nil},
		{"2020-2024", "twenty twenty to twenty twenty four", [][2]string{{"to", "-"}}},
		{"1–3 days", "one to three days", nil},
		{"0.25", "zero point two five", nil},
		{".5 cups", "point five cups", nil},
		{"version 1.2.3", "version one point two point three", nil},
		{"007", "zero zero seven", nil},
		{"12345678901234567890", "one two three four five six seven eight nine zero one two three four five six seven eight nine zero", nil},
		{"mp3 and B2B and 5G and 10x", "mp3 and B2B and 5G and 10x", nil},
		{"room #5", "room number five", [][2]string{{"number", "#"}}},
		{"~20 minutes", "about twenty minutes", nil},
		{"3*4 and 3 × 4", "three times four and three times four", nil},
		{"25°C", "twenty five degrees Celsius", nil},
		{"Mr. Smith and Dr. Who", "mister Smith and doctor Who", [][2]string{{"mister", "Mr."}, {"doctor", "Dr."}}},
		{"fruit, e.g. apples, etc.", "fruit, for example apples, et cetera.", [][2]string{{"example", "e.g."}, {"cetera.", "etc."}}},
		{"apples, etc. and more", "apples, et cetera and more", nil},
		{"Ms. Lee vs. Mrs. Doe", "miz Lee versus missus Doe", nil},
		{"AT&T + you = us @home", "AT and T plus you equals us at home", [][2]string{{"and", "&"}}},
		{"**Bold** and *italic* and `code`", "Bold and italic and code", [][2]string{{"Bold", "Bold"}, {"code", "code"}}},
		{"# Title\n## Sub\n- item one\n* item two\n+ item three\n> quote", " Title\n Sub\n item one\n item two\n item three\n quote", nil},
		{"snake_case", "snake case", nil},
		{"See [the docs](https://example.com/docs) now", "See the docs now", [][2]string{{"docs", "docs"}, {"now", "now"}}},
		{"Visit https://www.example.com/path?q=1.", "Visit example dot com.", [][2]string{{"example", "https://www.example.com/path?q=1"}}},
		{"Great job 🎉👍🏽!", "Great job !", nil},
		{"Naïve déjà vu, Zürich", "Naïve déjà vu, Zürich", [][2]string{{"Zürich", "Zürich"}}},
		{"tab\there\r\nnul\x00x", "tab\there \nnul x", nil},
		{"bad \xff byte", "bad   byte", nil},
		{"", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n := Normalize(tt.in)
			if n.Spoken != tt.spoken {
				t.Fatalf("spoken %q, want %q", n.Spoken, tt.spoken)
			}
			got := spokenWords(n)
			for _, m := range tt.maps {
				found := false
				for _, g := range got {
					if g[0] == m[0] {
						if g[1] != m[1] {
							t.Errorf("%q maps to %q, want %q", m[0], g[1], m[1])
						}
						found = true
						break
					}
				}
				if !found {
					t.Errorf("no spoken word %q in %q", m[0], n.Spoken)
				}
			}
			checkInvariants(t, n)
		})
	}
}

func TestSpanEdges(t *testing.T) {
	n := Normalize("Pay $3.50 now")
	tests := []struct {
		start, end int
		want       string
	}{
		{0, 3, "Pay"},
		{4, 9, "$3.50"},       // "three"
		{4, 4, ""},            // empty span inside an expansion
		{-5, 3, "Pay"},        // clamped
		{0, 1000, n.Original}, // clamped
		{len(n.Spoken), len(n.Spoken) + 3, ""},
		{9, 4, ""}, // end before start: empty at start
	}
	for _, tt := range tests {
		a, b := n.Span(tt.start, tt.end)
		if got := n.Original[a:b]; got != tt.want {
			t.Errorf("Span(%d, %d) = %q, want %q", tt.start, tt.end, got, tt.want)
		}
	}
	if a, b := (Text{}).Span(0, 5); a != 0 || b != 0 {
		t.Errorf("empty text: %d, %d", a, b)
	}
}

// checkInvariants asserts what every consumer of the mapping relies on.
func checkInvariants(t *testing.T, n Text) {
	t.Helper()
	if !utf8.ValidString(n.Spoken) {
		t.Fatalf("spoken text is not valid UTF-8: %q", n.Spoken)
	}
	for _, r := range n.Spoken {
		if isControl(r) || r == 0 {
			t.Fatalf("spoken text holds control character %U: %q", r, n.Spoken)
		}
	}
	// Segments cover the spoken text in order, and literal ones are copies.
	pos, prevStart, prevEnd := 0, 0, 0
	for _, sg := range n.segs {
		if sg.SpokenStart != pos || sg.SpokenEnd <= sg.SpokenStart {
			t.Fatalf("segment %+v does not continue at %d", sg, pos)
		}
		if sg.OrigStart < prevStart || sg.OrigEnd < prevEnd || sg.OrigStart > sg.OrigEnd || sg.OrigEnd > len(n.Original) {
			t.Fatalf("segment %+v goes backwards or out of the original (after %d..%d)", sg, prevStart, prevEnd)
		}
		if sg.Literal && n.Spoken[sg.SpokenStart:sg.SpokenEnd] != n.Original[sg.OrigStart:sg.OrigEnd] {
			t.Fatalf("literal segment %+v is not a copy", sg)
		}
		pos, prevStart, prevEnd = sg.SpokenEnd, sg.OrigStart, sg.OrigEnd
	}
	if pos != len(n.Spoken) {
		t.Fatalf("segments end at %d of %d", pos, len(n.Spoken))
	}
	boundaries := runeBoundaries(n.Original)
	// Every span between spoken rune boundaries maps into the original, on its rune
	// boundaries, and the mapping never goes backwards.
	var spoken []int
	for i := range n.Spoken {
		spoken = append(spoken, i)
	}
	spoken = append(spoken, len(n.Spoken))
	lastA, lastB := 0, 0
	for k := 0; k+1 < len(spoken); k++ {
		a, b := n.Span(spoken[k], spoken[k+1])
		if a < 0 || b > len(n.Original) || a > b {
			t.Fatalf("Span(%d,%d) = %d,%d out of bounds", spoken[k], spoken[k+1], a, b)
		}
		if !boundaries[a] || !boundaries[b] {
			t.Fatalf("Span(%d,%d) = %d,%d not on rune boundaries of %q", spoken[k], spoken[k+1], a, b, n.Original)
		}
		if a < lastA || b < lastB {
			t.Fatalf("Span(%d,%d) = %d,%d goes back from %d,%d", spoken[k], spoken[k+1], a, b, lastA, lastB)
		}
		lastA, lastB = a, b
		// A longer span covers the shorter ones it contains.
		if k+2 < len(spoken) {
			a2, b2 := n.Span(spoken[k], spoken[k+2])
			if a2 != a || b2 < b {
				t.Fatalf("Span(%d,%d) = %d,%d does not cover Span(%d,%d) = %d,%d", spoken[k], spoken[k+2], a2, b2, spoken[k], spoken[k+1], a, b)
			}
		}
	}
}

// runeBoundaries marks the offsets where Go's reading of s starts a rune, and len(s).
func runeBoundaries(s string) map[int]bool {
	m := map[int]bool{len(s): true}
	for i := range s {
		m[i] = true
	}
	return m
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		"It costs $3.50, i.e. 3.5 dollars.", "Naïve café 😀 at 7:30 p.m.", "**bold** [link](http://x.y) `c`",
		"-5 −2.5% 1,000,000th 1990s 2020-2024 #3 ~4 25°C", "\xff\xfe\x00bad", "e\u0301te\u0301 中文 ÅÄÖ",
		"# h\n- b\n> q", "Mr. Dr. etc. e.g. A.M.", "$.5 £0.01 ¥3 €5bn $2 million", "www.example.com/a.",
		"3*4=12 & 5+6", "a\u200d\ufe0fb", "12:61 25:00 9:05pm", "[", "](", "[a](", "$", "-", "#", ".",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := Normalize(s)
		if n.Original != s {
			t.Fatal("original not kept")
		}
		checkInvariants(t, n)
	})
}

func TestCardinal(t *testing.T) {
	tests := map[uint64]string{
		0: "zero", 7: "seven", 13: "thirteen", 40: "forty", 99: "ninety nine", 100: "one hundred",
		101: "one hundred one", 1000: "one thousand", 1001: "one thousand one",
		1_000_000: "one million", 2_500_017: "two million five hundred thousand seventeen",
		999_999_999_999_999: "nine hundred ninety nine trillion nine hundred ninety nine billion nine hundred ninety nine million nine hundred ninety nine thousand nine hundred ninety nine",
	}
	for n, want := range tests {
		if got := cardinal(n); got != want {
			t.Errorf("cardinal(%d) = %q, want %q", n, got, want)
		}
	}
	ordinals := map[string]string{"one": "first", "twenty": "twentieth", "twenty one": "twenty first",
		"one hundred": "one hundredth", "twelve": "twelfth", "eight": "eighth", "nine": "ninth", "zero": "zeroth"}
	for c, want := range ordinals {
		if got := ordinalWords(c); got != want {
			t.Errorf("ordinalWords(%q) = %q, want %q", c, got, want)
		}
	}
	if got := strings.Join([]string{yearWords(2000), yearWords(2010), yearWords(1100)}, "|"); got != "two thousand|twenty ten|eleven hundred" {
		t.Errorf("years: %q", got)
	}
}
