package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// floatRange is the range a float flag accepts: [min, max], or (min, max] when
// openMin. Every float flag refuses NaN and the infinities, which strconv (and so the
// flag package's Float64) would take.
type floatRange struct {
	min, max float64
	openMin  bool
}

// atLeast0 is the range of flags that are any finite number ≥ 0.
var atLeast0 = floatRange{min: 0, max: math.MaxFloat32}

func (r floatRange) String() string {
	switch {
	case r.max == math.MaxFloat32 && r.min == 0:
		return "a finite number ≥ 0"
	case r.openMin:
		return fmt.Sprintf("a number in (%g, %g]", r.min, r.max)
	}
	return fmt.Sprintf("a number in [%g, %g]", r.min, r.max)
}

// parse reads s and checks it against r.
func (r floatRange) parse(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	inRange := v <= r.max && (v > r.min || (!r.openMin && v == r.min)) // false for NaN
	if err != nil || math.IsInf(v, 0) || !inRange {
		return 0, fmt.Errorf("%q is not %s", s, r)
	}
	return v, nil
}

// float64Flag is a float64 flag limited to a range.
type float64Flag struct {
	v *float64
	r floatRange
}

func (f float64Flag) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.v, 'g', -1, 64)
}

func (f float64Flag) Set(s string) error {
	v, err := f.r.parse(s)
	if err == nil {
		*f.v = v
	}
	return err
}

// floatVar defines a float64 flag that accepts only numbers in r.
func floatVar(fs *flag.FlagSet, name string, value float64, r floatRange, usage string) *float64 {
	p := new(float64)
	*p = value
	fs.Var(float64Flag{v: p, r: r}, name, usage+" ("+r.String()+")")
	return p
}

// float32Func returns a flag.Func setter of a float32 that accepts only numbers in r.
func float32Func(dst *float32, r floatRange) func(string) error {
	return func(s string) error {
		v, err := r.parse(s)
		if err == nil {
			*dst = float32(v)
		}
		return err
	}
}
