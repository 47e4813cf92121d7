package main

import (
	"math"
	"testing"
)

func TestFloatRange(t *testing.T) {
	threshold := floatRange{min: 0, max: 1, openMin: true}
	for _, tt := range []struct {
		r    floatRange
		in   string
		want float64
		ok   bool
	}{
		{threshold, "0.5", 0.5, true},
		{threshold, " 1 ", 1, true},
		{threshold, "0", 0, false},
		{threshold, "NaN", 0, false},
		{threshold, "nan", 0, false},
		{threshold, "1.01", 0, false},
		{atLeast0, "0", 0, true},
		{atLeast0, "3.5", 3.5, true},
		{atLeast0, "Inf", 0, false},
		{atLeast0, "+Inf", 0, false},
		{atLeast0, "-1", 0, false},
		{atLeast0, "1e400", 0, false},
		{atLeast0, "0x1p-2", 0.25, true},
		{atLeast0, "", 0, false},
	} {
		got, err := tt.r.parse(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("%v.parse(%q) = %g, %v", tt.r, tt.in, got, err)
		}
	}
}

// FuzzFloatRange: whatever the text, an accepted value is finite and in range.
func FuzzFloatRange(f *testing.F) {
	for _, s := range []string{"0.5", "NaN", "Inf", "-0", "1e309", "0x1p-1074"} {
		f.Add(s)
	}
	r := floatRange{min: 0, max: 1, openMin: true}
	f.Fuzz(func(t *testing.T, s string) {
		for _, rr := range []floatRange{r, atLeast0} {
			v, err := rr.parse(s)
			if err != nil {
				continue
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || v > rr.max || v < rr.min || (rr.openMin && v == rr.min) {
				t.Fatalf("%v accepted %q as %g", rr, s, v)
			}
		}
	})
}
