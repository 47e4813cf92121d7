package normalize

import (
	"strconv"
	"strings"
)

// Number words are written with spaces, not hyphens ("forty two"), so that a synthesiser
// reports each as a word of its own; all of them map back to the digits they came from.

func smallWords() []string {
	return []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
		"eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"}
}

func tensWords() []string {
	return []string{"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"}
}

func scaleWords() []string {
	return []string{"", "thousand", "million", "billion", "trillion"}
}

// maxCardinalDigits is the longest number read as a quantity; longer ones (account
// numbers, hashes) are read digit by digit.
const maxCardinalDigits = 15

// below1000 writes 0 < n < 1000.
func below1000(n int) string {
	small, tens := smallWords(), tensWords()
	var parts []string
	if n >= 100 {
		parts = append(parts, small[n/100], "hundred")
		n %= 100
	}
	switch {
	case n == 0:
	case n < 20:
		parts = append(parts, small[n])
	default:
		parts = append(parts, tens[n/10])
		if n%10 != 0 {
			parts = append(parts, small[n%10])
		}
	}
	return strings.Join(parts, " ")
}

// cardinal writes n < 10^15 in words.
func cardinal(n uint64) string {
	if n == 0 {
		return "zero"
	}
	scales := scaleWords()
	var groups []string
	for scale := 0; n > 0; scale++ {
		if g := int(n % 1000); g != 0 {
			w := below1000(g)
			if scales[scale] != "" {
				w += " " + scales[scale]
			}
			groups = append([]string{w}, groups...)
		}
		n /= 1000
	}
	return strings.Join(groups, " ")
}

// digitWords reads digits one by one.
func digitWords(digits string) string {
	small := smallWords()
	parts := make([]string, 0, len(digits))
	for i := 0; i < len(digits); i++ {
		parts = append(parts, small[digits[i]-'0'])
	}
	return strings.Join(parts, " ")
}

// integerWords reads a string of digits as a quantity where that is sensible.
func integerWords(digits string) string {
	if digits == "" {
		return ""
	}
	if len(digits) > maxCardinalDigits || (len(digits) > 1 && digits[0] == '0') {
		return digitWords(digits)
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return digitWords(digits)
	}
	return cardinal(n)
}

// ordinalWords turns the last word of a cardinal into its ordinal.
func ordinalWords(cardinalText string) string {
	i := strings.LastIndexByte(cardinalText, ' ') + 1
	head, last := cardinalText[:i], cardinalText[i:]
	switch last {
	case "one":
		last = "first"
	case "two":
		last = "second"
	case "three":
		last = "third"
	case "five":
		last = "fifth"
	case "eight":
		last = "eighth"
	case "nine":
		last = "ninth"
	case "twelve":
		last = "twelfth"
	default:
		if strings.HasSuffix(last, "y") {
			last = strings.TrimSuffix(last, "y") + "ieth"
		} else {
			last += "th"
		}
	}
	return head + last
}

// pluralWords makes the last word plural, for decades ("nineteen nineties").
func pluralWords(text string) string {
	i := strings.LastIndexByte(text, ' ') + 1
	head, last := text[:i], text[i:]
	switch {
	case strings.HasSuffix(last, "y"):
		last = strings.TrimSuffix(last, "y") + "ies"
	case strings.HasSuffix(last, "x"):
		last += "es"
	default:
		last += "s"
	}
	return head + last
}

// yearWords reads 1100 <= n <= 2099 the way years are said.
func yearWords(n int) string {
	hi, lo := n/100, n%100
	switch {
	case n >= 2000 && n < 2010:
		return cardinal(uint64(n))
	case lo == 0:
		return below1000(hi) + " hundred"
	case lo < 10:
		return below1000(hi) + " oh " + below1000(lo)
	default:
		return below1000(hi) + " " + below1000(lo)
	}
}
