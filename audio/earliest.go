package audio

import "time"

// Earliest is a sliding minimum over time-stamped values: the least value noted during
// the last Window. Device clocks use it. A sound callback's timing of its buffer is
// never early but often late (a loaded machine, a garbage collection, a sound server
// delivering in bursts), so the earliest estimate of a recent window is the best one,
// and the window lets a clock that truly moves later (drift, a grown buffer) be
// followed once the earlier estimates have aged out. It is owned by one goroutine (or
// one audio callback thread); once it holds a window's entries, noting values does not
// allocate.
type Earliest struct {
	// Window is how long a value is remembered.
	Window time.Duration
	// entries[head:] have increasing values and times: an entry is dropped when a later
	// one is not greater (it can never be the minimum again) or when it is older than
	// Window.
	entries []earliestEntry
	head    int
}

type earliestEntry struct{ at, v time.Duration }

// Note adds value v, seen at time at (times never go back).
func (e *Earliest) Note(at, v time.Duration) {
	for len(e.entries) > e.head && e.entries[len(e.entries)-1].v >= v {
		e.entries = e.entries[:len(e.entries)-1]
	}
	if len(e.entries) == cap(e.entries) && e.head > 0 {
		n := copy(e.entries, e.entries[e.head:])
		e.entries, e.head = e.entries[:n], 0
	}
	e.entries = append(e.entries, earliestEntry{at: at, v: v})
	for len(e.entries)-e.head > 1 && at-e.entries[e.head].at > e.Window {
		e.head++
	}
}

// Min returns the least value of the window, and false before the first.
func (e *Earliest) Min() (time.Duration, bool) {
	if len(e.entries) == e.head {
		return 0, false
	}
	return e.entries[e.head].v, true
}

// Len returns how many entries the window keeps (each could become the minimum).
func (e *Earliest) Len() int { return len(e.entries) - e.head }

// Reset forgets every value (the clock started anew).
func (e *Earliest) Reset() { e.entries, e.head = e.entries[:0], 0 }
