package clock

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"
)

// Virtual is a discrete-event clock: its time jumps straight to the next timer's deadline
// whenever no tracked work is running and no tracked event is in flight. Computation
// therefore takes no virtual time, and a replay runs as fast as the machine allows while
// its timing stays the same on every run. Within one instant, wake timers and settling
// workers go on one at a time in rank order, so that the order of what happens at an
// instant does not depend on how long real computations took either.
//
// One goroutine owns the scheduler's state; every other goroutine talks to it through
// the ops channel. Close stops that goroutine.
type Virtual struct {
	ops  chan func(*virtualState)
	done chan struct{}
	now  atomic.Int64 // UnixNano of the current virtual time, written only by the owner
}

type virtualState struct {
	v        *Virtual
	tokens   int
	timers   timerHeap
	seq      uint64 // orders timers, and settlers, created at the same point
	settlers []*settler
}

// settler is a unit of work waiting in Settle.
type settler struct {
	rank  int
	order uint64
	seq   uint64 // breaks ties: first come, first served
	ready chan struct{}
}

// before reports whether s goes on before o.
func (s *settler) before(o *settler) bool {
	if s.rank != o.rank {
		return s.rank < o.rank
	}
	if s.order != o.order {
		return s.order < o.order
	}
	return s.seq < o.seq
}

// errClosed is what Settle returns once the clock is closed.
var errClosed = errors.New("clock: the virtual clock is closed")

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
			st.schedule()
		case <-v.done:
			return
		}
	}
}

// schedule starts the next thing while no tracked work runs: a timer due now, else a
// settling worker, else (moving time on) the earliest timer. Untracked timers add no
// work when they fire, so time keeps moving through them until something tracked runs
// or nothing is left.
func (st *virtualState) schedule() {
	for st.tokens == 0 {
		switch {
		case len(st.timers) > 0 && st.timers[0].deadline <= st.v.now.Load():
			st.fire()
		case len(st.settlers) > 0:
			st.release()
		case len(st.timers) > 0:
			st.v.now.Store(st.timers[0].deadline)
			st.fire()
		default:
			return
		}
	}
}

// fire fires the first timer (due now: the caller moved time to its deadline).
func (st *virtualState) fire() {
	t := heap.Pop(&st.timers).(*virtualTimer)
	t.index = -1
	t.fired = true
	if t.tracked {
		st.tokens++
	}
	t.c <- time.Unix(0, st.v.now.Load()) // buffered: never blocks
}

// release hands a unit of work back to the settler that goes first (settler.before).
func (st *virtualState) release() {
	first := 0
	for i, s := range st.settlers {
		if s.before(st.settlers[first]) {
			first = i
		}
	}
	s := st.settlers[first]
	st.settlers = slices.Delete(st.settlers, first, first+1)
	st.tokens++
	close(s.ready)
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
func (v *Virtual) End() { v.do((*virtualState).end) }

func (st *virtualState) end() {
	st.tokens--
	if st.tokens < 0 {
		panic("clock: Virtual.End without matching Begin")
	}
}

// Settle implements Scheduler.
func (v *Virtual) Settle(ctx context.Context, rank int, order uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := &settler{rank: rank, order: order, ready: make(chan struct{})}
	v.do(func(st *virtualState) {
		st.seq++
		s.seq = st.seq
		st.settlers = append(st.settlers, s)
		st.end()
	})
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		v.call(func(st *virtualState) {
			if i := slices.Index(st.settlers, s); i >= 0 {
				st.settlers = slices.Delete(st.settlers, i, i+1)
				st.tokens++ // still waiting: take the unit back here
			}
		})
		return ctx.Err()
	case <-v.done:
		return errClosed
	}
}

// NewTimer returns a timer whose firing is not tracked work; use it from goroutines the
// scheduler does not count (tests, helpers outside a network).
func (v *Virtual) NewTimer(d time.Duration) Timer { return v.newTimer(d, false, 0) }

// NewWakeTimer implements Scheduler.
func (v *Virtual) NewWakeTimer(d time.Duration, rank int) Timer { return v.newTimer(d, true, rank) }

// Advance moves time forward by d at once, firing the timers due on the way, whether or
// not tracked work is running. Tests use it to step time by hand.
func (v *Virtual) Advance(d time.Duration) {
	v.call(func(st *virtualState) {
		target := v.now.Load() + int64(d)
		for len(st.timers) > 0 && st.timers[0].deadline <= target {
			v.now.Store(max(v.now.Load(), st.timers[0].deadline))
			st.fire()
		}
		if v.now.Load() < target {
			v.now.Store(target)
		}
	})
}

func (v *Virtual) newTimer(d time.Duration, tracked bool, rank int) Timer {
	t := &virtualTimer{v: v, c: make(chan time.Time, 1), tracked: tracked, rank: rank, index: -1}
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
	rank     int    // timers due together fire highest rank first,
	seq      uint64 // then in creation order
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
	if h[i].rank != h[j].rank {
		return h[i].rank > h[j].rank
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
