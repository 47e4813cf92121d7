package clock

import (
	"container/heap"
	"sync/atomic"
	"time"
)

// Virtual is a discrete-event clock: its time jumps straight to the next timer's deadline
// whenever no tracked work is running and no tracked event is in flight. Computation
// therefore takes no virtual time, and a replay runs as fast as the machine allows while
// its timing stays the same on every run.
//
// One goroutine owns the scheduler's state; every other goroutine talks to it through
// the ops channel. Close stops that goroutine.
type Virtual struct {
	ops  chan func(*virtualState)
	done chan struct{}
	now  atomic.Int64 // UnixNano of the current virtual time, written only by the owner
}

type virtualState struct {
	v      *Virtual
	tokens int
	timers timerHeap
	seq    uint64
}

// NewVirtual returns a virtual clock that starts at start.
func NewVirtual(start time.Time) *Virtual {
	v := &Virtual{ops: make(chan func(*virtualState), 256), done: make(chan struct{})}
	v.now.Store(start.UnixNano())
	go v.run()
	return v
}

func (v *Virtual) run() {
	st := &virtualState{v: v}
	for {
		select {
		case op := <-v.ops:
			op(st)
			// Untracked timers add no work when they fire, so time keeps moving through
			// them until something tracked runs (or no timer is left).
			for st.tokens == 0 && len(st.timers) > 0 {
				st.advance()
			}
		case <-v.done:
			return
		}
	}
}

// advance moves time to the earliest deadline and fires every timer due then.
func (st *virtualState) advance() {
	if len(st.timers) == 0 {
		return
	}
	next := st.timers[0].deadline
	if next > st.v.now.Load() {
		st.v.now.Store(next)
	}
	now := st.v.now.Load()
	for len(st.timers) > 0 && st.timers[0].deadline <= now {
		t := heap.Pop(&st.timers).(*virtualTimer)
		t.index = -1
		t.fired = true
		if t.tracked {
			st.tokens++
		}
		t.c <- time.Unix(0, now) // buffered: never blocks
	}
}

func (v *Virtual) do(op func(*virtualState)) {
	select {
	case v.ops <- op:
	case <-v.done:
	}
}

// call runs op on the owner goroutine and waits for it.
func (v *Virtual) call(op func(*virtualState)) {
	finished := make(chan struct{})
	v.do(func(st *virtualState) { op(st); close(finished) })
	select {
	case <-finished:
	case <-v.done:
	}
}

// Close stops the scheduler goroutine; pending timers never fire afterwards.
func (v *Virtual) Close() {
	select {
	case <-v.done:
	default:
		close(v.done)
	}
}

// Now returns the current virtual time (without a monotonic reading).
func (v *Virtual) Now() time.Time { return time.Unix(0, v.now.Load()) }

// Begin implements Scheduler.
func (v *Virtual) Begin() { v.do(func(st *virtualState) { st.tokens++ }) }

// End implements Scheduler.
func (v *Virtual) End() {
	v.do(func(st *virtualState) {
		st.tokens--
		if st.tokens < 0 {
			panic("clock: Virtual.End without matching Begin")
		}
	})
}

// NewTimer returns a timer whose firing is not tracked work; use it from goroutines the
// scheduler does not count (tests, helpers outside a network).
func (v *Virtual) NewTimer(d time.Duration) Timer { return v.newTimer(d, false) }

// NewWakeTimer implements Scheduler.
func (v *Virtual) NewWakeTimer(d time.Duration) Timer { return v.newTimer(d, true) }

// Advance moves time forward by d at once, firing the timers due on the way, whether or
// not tracked work is running. Tests use it to step time by hand.
func (v *Virtual) Advance(d time.Duration) {
	v.call(func(st *virtualState) {
		target := v.now.Load() + int64(d)
		for len(st.timers) > 0 && st.timers[0].deadline <= target {
			st.advance()
		}
		if v.now.Load() < target {
			v.now.Store(target)
		}
	})
}

func (v *Virtual) newTimer(d time.Duration, tracked bool) Timer {
	t := &virtualTimer{v: v, c: make(chan time.Time, 1), tracked: tracked, index: -1}
	v.call(func(st *virtualState) {
		if d < 0 {
			d = 0
		}
		st.seq++
		t.deadline = v.now.Load() + int64(d)
		t.seq = st.seq
		heap.Push(&st.timers, t)
	})
	return t
}

type virtualTimer struct {
	v        *Virtual
	c        chan time.Time
	deadline int64
	seq      uint64 // breaks ties so timers due together fire in creation order
	tracked  bool
	// owned by the scheduler goroutine:
	index int
	fired bool
}

func (t *virtualTimer) C() <-chan time.Time { return t.c }

func (t *virtualTimer) Stop() bool {
	stopped := false
	t.v.call(func(st *virtualState) {
		if t.index >= 0 {
			heap.Remove(&st.timers, t.index)
			t.index = -1
			stopped = true
			return
		}
		if t.fired && t.tracked {
			// The firing is in the channel and nobody will take it over: drain it and end
			// its unit of work here.
			select {
			case <-t.c:
				st.tokens--
			default:
			}
		}
	})
	return stopped
}

type timerHeap []*virtualTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].deadline != h[j].deadline {
		return h[i].deadline < h[j].deadline
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*virtualTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return t
}
