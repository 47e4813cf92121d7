package audio

import (
	"testing"
	"time"
)

// TestEarliest: the least value of the window, late values ignored, values older than
// the window forgotten, and no allocation once the window is full.
func TestEarliest(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	e := Earliest{Window: ms(100)}
	if _, ok := e.Min(); ok {
		t.Fatal("a minimum before any value")
	}
	for i, v := range []int{50, 60, 45, 70, 45, 80} { // one every 10 ms
		e.Note(ms(10*i), ms(v))
	}
	if m, _ := e.Min(); m != ms(45) {
		t.Fatalf("min %v, want 45ms", m)
	}
	// 45 ms was last seen at 40 ms; from 141 ms on only the values after it remain.
	e.Note(ms(141), ms(90))
	if m, _ := e.Min(); m != ms(80) {
		t.Fatalf("min %v after the window passed the 45s, want 80ms", m)
	}
	e.Reset()
	if _, ok := e.Min(); ok {
		t.Fatal("a minimum after Reset")
	}
	// A long run of jittery values: the window's earliest always, without allocating.
	at := ms(1000)
	next := func(i int) {
		at += ms(10)
		e.Note(at, ms(500+(i*37)%20))
	}
	for i := range 100 {
		next(i)
	}
	i := 100
	if allocs := testing.AllocsPerRun(1000, func() { next(i); i++ }); allocs != 0 {
		t.Errorf("%v allocations per value", allocs)
	}
	if m, _ := e.Min(); m != ms(500) && m != ms(501) && m != ms(502) {
		t.Errorf("min %v, want about 500ms", m)
	}
	if e.Len() > 11 {
		t.Errorf("%d entries for a window of 11 values", e.Len())
	}
}
