package normalize

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// amount is a number as written: its integer digits (thousands separators removed) and
// the digit groups after each decimal point.
type amount struct {
	integer string
	fracs   []string
	grouped bool // written with thousands separators
	end     int
}

// scanAmount reads digits, thousands separators and decimal parts at i.
func scanAmount(s string, i int) amount {
	a := amount{}
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	intDigits := s[i:j]
	if n := len(intDigits); n >= 1 && n <= 3 {
		for j+3 < len(s) && s[j] == ',' && isDigit(s[j+1]) && isDigit(s[j+2]) && isDigit(s[j+3]) &&
			(j+4 == len(s) || !isDigit(s[j+4])) {
			a.grouped = true
			j += 4
		}
	}
	a.integer = strings.ReplaceAll(s[i:j], ",", "")
	for j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
		k := j + 1
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		a.fracs = append(a.fracs, s[j+1:k])
		j = k
	}
	a.end = j
	return a
}

// words reads the amount as a quantity: "three point one four", "one point two point three".
func (a amount) words() string {
	w := integerWords(a.integer)
	for _, f := range a.fracs {
		if w != "" {
			w += " "
		}
		w += "point " + digitWords(f)
	}
	return w
}

func (a amount) plain() bool { return !a.grouped && len(a.fracs) == 0 }

// letterAt reports whether a letter starts at byte i.
func letterAt(s string, i int) bool {
	r, _ := utf8.DecodeRuneInString(s[min(i, len(s)):])
	return i < len(s) && unicode.IsLetter(r)
}

// number reads the numeric token at i (digits, or a decimal point and digits) with what
// belongs to it: a time of day, an ordinal or decade suffix, a percent sign. ok is false
// when letters follow that make it part of a word ("10x", "3D"), which is then left to
// the synthesiser.
func number(s string, i int) (words string, end int, ok bool) {
	a := scanAmount(s, i)
	j := a.end
	if a.integer == "" && len(a.fracs) == 0 {
		return "", 0, false
	}
	if w, e, ok := timeOfDay(s, a, j); ok {
		return w, e, true
	}
	if len(a.fracs) == 0 && a.integer != "" {
		if suf := strings.ToLower(s[j:min(j+2, len(s))]); (suf == "st" || suf == "nd" || suf == "rd" || suf == "th") && !letterAt(s, j+2) {
			return ordinalWords(integerWords(a.integer)), j + 2, true
		}
		if a.plain() && (len(a.integer) == 4 || len(a.integer) == 2) && a.integer[len(a.integer)-1] == '0' &&
			byteAt(s, j) == 's' && !letterAt(s, j+1) {
			return pluralWords(decadeBase(a.integer)), j + 1, true
		}
	}
	if letterAt(s, j) {
		return "", 0, false
	}
	switch {
	case a.plain() && len(a.integer) == 4:
		n, _ := strconv.Atoi(a.integer)
		if n >= 1100 && n <= 2099 {
			words = yearWords(n)
			break
		}
		words = a.words()
	default:
		words = a.words()
	}
	if byteAt(s, j) == '%' {
		words += " percent"
		j++
	}
	return words, j, true
}

// decadeBase is the number a decade is named after: "1990" → "nineteen ninety", "80" → "eighty".
func decadeBase(digits string) string {
	n, _ := strconv.Atoi(digits)
	if len(digits) == 4 && n >= 1100 && n <= 2099 {
		return yearWords(n)
	}
	return integerWords(digits)
}

// timeOfDay reads H:MM (with an optional am/pm) when the amount a, which ends at j, is
// its hour.
func timeOfDay(s string, a amount, j int) (words string, end int, ok bool) {
	if !a.plain() || len(a.integer) == 0 || len(a.integer) > 2 || byteAt(s, j) != ':' ||
		!isDigit(byteAt(s, j+1)) || !isDigit(byteAt(s, j+2)) || isDigit(byteAt(s, j+3)) {
		return "", 0, false
	}
	h, _ := strconv.Atoi(a.integer)
	m, _ := strconv.Atoi(s[j+1 : j+3])
	if h > 24 || m > 59 {
		return "", 0, false
	}
	end = j + 3
	suffix := ""
	k := end
	if byteAt(s, k) == ' ' {
		k++
	}
	for _, mer := range []struct{ text, words string }{
		{"a.m.", "a m"}, {"p.m.", "p m"}, {"A.M.", "a m"}, {"P.M.", "p m"},
		{"am", "a m"}, {"pm", "p m"}, {"AM", "a m"}, {"PM", "p m"},
	} {
		if strings.HasPrefix(s[k:], mer.text) && !letterAt(s, k+len(mer.text)) {
			suffix = mer.words
			end = k + len(mer.text)
			if strings.HasSuffix(mer.text, ".") && sentenceEndsAt(s, end) {
				suffix += "."
			}
			break
		}
	}
	if letterAt(s, end) {
		return "", 0, false
	}
	words = below1000OrZero(h)
	switch {
	case m == 0 && suffix == "":
		words += " o'clock"
	case m == 0:
	case m < 10:
		words += " oh " + below1000(m)
	default:
		words += " " + below1000(m)
	}
	if suffix != "" {
		words += " " + suffix
	}
	return words, end, true
}

func below1000OrZero(n int) string {
	if n == 0 {
		return "zero"
	}
	return below1000(n)
}

type currency struct {
	one, many           string
	minorOne, minorMany string // empty: no minor unit in speech
}

func currencyOf(sym rune) currency {
	switch sym {
	case '€':
		return currency{"euro", "euros", "cent", "cents"}
	case '£':
		return currency{"pound", "pounds", "penny", "pence"}
	case '¥':
		return currency{"yen", "yen", "", ""}
	}
	return currency{"dollar", "dollars", "cent", "cents"}
}

// money reads an amount after a currency sign at i: "$3.50" → "three dollars and fifty
// cents", "$2.5 million" → "two point five million dollars", "$5k" → "five thousand dollars".
func money(s string, i int, sym rune, size int) (words string, end int, ok bool) {
	j := i + size
	if !isDigit(byteAt(s, j)) && !(byteAt(s, j) == '.' && isDigit(byteAt(s, j+1))) {
		return "", 0, false
	}
	a := scanAmount(s, j)
	if len(a.fracs) > 1 {
		return "", 0, false
	}
	cur := currencyOf(sym)
	end = a.end
	scale := ""
	for _, sc := range []struct{ text, words string }{
		{" thousand", "thousand"}, {" million", "million"}, {" billion", "billion"}, {" trillion", "trillion"},
		{"k", "thousand"}, {"K", "thousand"}, {"m", "million"}, {"M", "million"}, {"bn", "billion"}, {"B", "billion"},
	} {
		if strings.HasPrefix(s[end:], sc.text) && !letterAt(s, end+len(sc.text)) {
			scale, end = sc.words, end+len(sc.text)
			break
		}
	}
	if letterAt(s, end) {
		return "", 0, false
	}
	switch {
	case scale != "":
		return a.words() + " " + scale + " " + cur.many, end, true
	case len(a.fracs) == 1 && len(a.fracs[0]) == 2 && cur.minorOne != "":
		major, minor := a.integer, strings.TrimLeft(a.fracs[0], "0")
		var parts []string
		if (major != "" && strings.Trim(major, "0") != "") || minor == "" {
			parts = append(parts, unit(major, cur.one, cur.many))
		}
		if minor != "" {
			parts = append(parts, unit(minor, cur.minorOne, cur.minorMany))
		}
		return strings.Join(parts, " and "), end, true
	case len(a.fracs) == 1:
		return a.words() + " " + cur.many, end, true
	}
	return unit(a.integer, cur.one, cur.many), end, true
}

// unit reads a count of a unit, singular for one.
func unit(digits, one, many string) string {
	if digits == "" {
		digits = "0"
	}
	w := integerWords(strings.TrimLeft(digits, "0"))
	if w == "" {
		w = "zero"
	}
	if w == "one" {
		return w + " " + one
	}
	return w + " " + many
}
