package iu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/clock"
)

func mustRun(t *testing.T, n *Network) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestOrderingPerProducer(t *testing.T) {
	const count = 2000
	for _, inbox := range []int{1, 4, 64} {
		t.Run(fmt.Sprintf("inbox=%d", inbox), func(t *testing.T) {
			out := make(chan []received, 1)
			n := NewNetwork(WithInboxSize(inbox))
			src, snk := source("src", count), sink("sink", out, nil)
			if err := n.Add(src, snk); err != nil {
				t.Fatal(err)
			}
			if err := n.Connect(src, snk); err != nil {
				t.Fatal(err)
			}
			mustRun(t, n)
			got := <-out
			if len(got) != count {
				t.Fatalf("got %d values, want %d", len(got), count)
			}
			for i, r := range got {
				if r.value != i {
					t.Fatalf("value %d at position %d: out of order", r.value, i)
				}
			}
		})
	}
}

func TestFanOutAndFanIn(t *testing.T) {
	const count = 500
	n := NewNetwork(WithInboxSize(8))
	outs := make([]chan []received, 3)
	var sinks []Module
	for i := range outs {
		outs[i] = make(chan []received, 1)
		s := sink(fmt.Sprintf("sink%d", i), outs[i], nil)
		sinks = append(sinks, s)
		if err := n.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	producers := []Module{source("a", count), source("b", count), source("c", count)}
	for _, p := range producers {
		if err := n.Add(p); err != nil {
			t.Fatal(err)
		}
		// Every producer feeds every sink: fan-out from each producer, fan-in at each sink.
		for _, s := range sinks {
			if err := n.Connect(p, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustRun(t, n)
	for i, out := range outs {
		got := <-out
		next := map[string]int{}
		for _, r := range got {
			if r.value != next[r.from] {
				t.Fatalf("sink%d: from %s got %d, want %d (per-producer order broken)", i, r.from, r.value, next[r.from])
			}
			next[r.from]++
		}
		for _, p := range producers {
			if next[p.Name()] != count {
				t.Errorf("sink%d: got %d values from %s, want %d", i, next[p.Name()], p.Name(), count)
			}
		}
	}
}

func TestUpdateRules(t *testing.T) {
	type step struct {
		typ     UpdateType
		iu      int // index into the IUs made for the test
		wantErr string
	}
	tests := []struct {
		name  string
		steps [][]step // batches
	}{
		{"add then commit", [][]step{{{Add, 0, ""}}, {{Commit, 0, ""}}}},
		{"add and commit in one batch", [][]step{{{Add, 0, ""}, {Commit, 0, ""}}}},
		{"add, update, revoke", [][]step{{{Add, 0, ""}}, {{UpdatePayload, 0, ""}}, {{Revoke, 0, ""}}}},
		{"revoked is never committed", [][]step{{{Add, 0, ""}}, {{Revoke, 0, ""}}, {{Commit, 0, "after it was committed or revoked"}}}},
		{"revoke and commit in one batch", [][]step{{{Add, 0, ""}}, {{Revoke, 0, ""}, {Commit, 0, "after it was revoked"}}}},
		{"committed is never revoked", [][]step{{{Add, 0, ""}, {Commit, 0, ""}}, {{Revoke, 0, "after it was committed or revoked"}}}},
		{"committed is never updated", [][]step{{{Add, 0, ""}, {Commit, 0, ""}}, {{UpdatePayload, 0, "after it was committed or revoked"}}}},
		{"commit before add", [][]step{{{Commit, 0, "before it was added"}}}},
		{"added twice", [][]step{{{Add, 0, ""}}, {{Add, 0, "added twice"}}}},
		{"added twice in a batch", [][]step{{{Add, 0, ""}, {Add, 0, "added twice"}}}},
		{"foreign IU", [][]step{{{Add, -1, "was not created by"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOutput("m")
			ius := []IU{o.newIU(time.Now(), num(0), nil)}
			foreign := newOutput("other").newIU(time.Now(), num(9), nil)
			for bi, batch := range tt.steps {
				var ups []Update
				want := ""
				for _, s := range batch {
					u := foreign
					if s.iu >= 0 {
						u = ius[s.iu]
					}
					ups = append(ups, Update{Type: s.typ, IU: u})
					if s.wantErr != "" {
						want = s.wantErr
					}
				}
				_, err := o.apply(ups)
				switch {
				case want == "" && err != nil:
					t.Fatalf("batch %d: unexpected error %v", bi, err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalidUpdate)):
					t.Fatalf("batch %d: error %v, want one containing %q", bi, err, want)
				}
			}
		})
	}
}

func TestRejectedBatchChangesNothing(t *testing.T) {
	o := newOutput("m")
	a := o.newIU(time.Now(), num(1), nil)
	b := o.newIU(time.Now(), num(2), nil)
	if _, err := o.apply([]Update{AddOf(a)}); err != nil {
		t.Fatal(err)
	}
	// The commit of a would be fine, but b was never added: the batch fails as a whole.
	if _, err := o.apply([]Update{CommitOf(a), CommitOf(b)}); err == nil {
		t.Fatal("want error")
	}
	if _, err := o.apply([]Update{RevokeOf(a)}); err != nil {
		t.Fatalf("a should still be open after the rejected batch: %v", err)
	}
}

func TestPreviousChainSkipsRevoked(t *testing.T) {
	o := newOutput("asr")
	w1 := o.newIU(time.Now(), num(1), nil)
	w2 := o.newIU(time.Now(), num(2), nil)
	if w2.Previous != w1.ID {
		t.Fatalf("w2.Previous = %q, want %q", w2.Previous, w1.ID)
	}
	if _, err := o.apply([]Update{AddOf(w1), AddOf(w2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.apply([]Update{RevokeOf(w2)}); err != nil {
		t.Fatal(err)
	}
	w3 := o.newIU(time.Now(), num(3), nil)
	if w3.Previous != w1.ID {
		t.Fatalf("after revoking w2, w3.Previous = %q, want %q", w3.Previous, w1.ID)
	}
}

// TestPreviousChainSkipsRevokedInTheSameBatch: IUs made to replace others before the
// batch that revokes those (a recogniser's new hypothesis, sent whole) follow the last IU
// that survives the batch, whichever order the revocations come in.
func TestPreviousChainSkipsRevokedInTheSameBatch(t *testing.T) {
	for _, lastFirst := range []bool{true, false} {
		o := newOutput("asr")
		w1 := o.newIU(time.Now(), num(1), nil)
		w2 := o.newIU(time.Now(), num(2), nil)
		w3 := o.newIU(time.Now(), num(3), nil)
		if _, err := o.apply([]Update{AddOf(w1), AddOf(w2), AddOf(w3)}); err != nil {
			t.Fatal(err)
		}
		n1 := o.newIU(time.Now(), num(4), nil)
		n2 := o.newIU(time.Now(), num(5), nil)
		revokes := []Update{RevokeOf(w2), RevokeOf(w3)}
		if lastFirst {
			revokes[0], revokes[1] = revokes[1], revokes[0]
		}
		out, err := o.apply(append(revokes, AddOf(n1), AddOf(n2), CommitOf(n1)))
		if err != nil {
			t.Fatal(err)
		}
		if got := out[2].IU.Previous; got != w1.ID {
			t.Errorf("revoked last first %v: the first new IU follows %q, want %q", lastFirst, got, w1.ID)
		}
		if got := out[4].IU.Previous; got != w1.ID {
			t.Errorf("revoked last first %v: its commit says it follows %q, want %q", lastFirst, got, w1.ID)
		}
		if got := out[3].IU.Previous; got != n1.ID {
			t.Errorf("revoked last first %v: the second new IU follows %q, want %q", lastFirst, got, n1.ID)
		}
		if n3 := o.newIU(time.Now(), num(6), nil); n3.Previous != n2.ID {
			t.Errorf("revoked last first %v: the next IU follows %q, want %q", lastFirst, n3.Previous, n2.ID)
		}
	}
}

func TestInvalidUpdateStopsNetworkWithModuleName(t *testing.T) {
	bad := ModuleFunc{ModuleName: "bad", Fn: func(ctx context.Context, p *Ports) error {
		u := p.NewIU(num(1))
		if err := p.Send(ctx, AddOf(u), RevokeOf(u)); err != nil {
			return err
		}
		return p.Send(ctx, CommitOf(u))
	}}
	out := make(chan []received, 1)
	n := NewNetwork()
	s := sink("sink", out, nil)
	if err := n.Add(bad, s); err != nil {
		t.Fatal(err)
	}
	if err := n.Connect(bad, s); err != nil {
		t.Fatal(err)
	}
	err := n.Run(context.Background())
	var me *ModuleError
	if !errors.As(err, &me) || me.Module != "bad" || !errors.Is(err, ErrInvalidUpdate) {
		t.Fatalf("Run = %v, want ModuleError from bad wrapping ErrInvalidUpdate", err)
	}
	<-out
}

func TestFirstErrorCancelsOthers(t *testing.T) {
	boom := errors.New("boom")
	failing := ModuleFunc{ModuleName: "failing", Fn: func(ctx context.Context, p *Ports) error {
		return boom
	}}
	cancelled := make(chan error, 1)
	waiting := ModuleFunc{ModuleName: "waiting", Fn: func(ctx context.Context, p *Ports) error {
		// No producers: only the network's cancellation can end this wait.
		_, err := p.Next(ctx, time.Time{})
		cancelled <- err
		return err
	}}
	n := NewNetwork()
	if err := n.Add(failing, waiting); err != nil {
		t.Fatal(err)
	}
	err := n.Run(context.Background())
	var me *ModuleError
	if !errors.As(err, &me) || me.Module != "failing" || !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the failing module's error", err)
	}
	if werr := <-cancelled; !errors.Is(werr, context.Canceled) {
		t.Fatalf("waiting module got %v, want context.Canceled", werr)
	}
}

func TestBackPressure(t *testing.T) {
	const inbox, total = 4, 50
	var sent atomic.Int32
	release := make(chan struct{})
	firstTaken := make(chan struct{})
	prod := ModuleFunc{ModuleName: "prod", Fn: func(ctx context.Context, p *Ports) error {
		for i := 0; i < total; i++ {
			u := p.NewIU(num(i))
			if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
				return err
			}
			sent.Add(1)
		}
		return nil
	}}
	var taken atomic.Int32
	out := make(chan []received, 1)
	slow := sink("slow", out, func() {
		if taken.Add(1) == 1 {
			close(firstTaken)
			<-release // hold the consumer after its first message
		}
	})
	n := NewNetwork(WithInboxSize(inbox))
	if err := n.Add(prod, slow); err != nil {
		t.Fatal(err)
	}
	if err := n.Connect(prod, slow); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(context.Background()) }()
	<-firstTaken
	// The consumer holds one message; the inbox holds `inbox` more; the producer is then
	// blocked in its next Send. Wait until it has got that far, then check it stays there.
	deadline := time.Now().Add(5 * time.Second)
	for sent.Load() < int32(1+inbox) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if got := sent.Load(); got != int32(1+inbox) {
		t.Fatalf("producer sent %d messages past a stalled consumer, want exactly %d (inbox %d + 1 taken)", got, 1+inbox, inbox)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := <-out; len(got) != total {
		t.Fatalf("consumer got %d values, want %d: nothing may be dropped", len(got), total)
	}
}

func TestGracefulStopDrainsInFlightMessages(t *testing.T) {
	const total = 40
	sentAll := make(chan struct{})
	prod := ModuleFunc{ModuleName: "prod", Fn: func(ctx context.Context, p *Ports) error {
		for i := 0; i < total; i++ {
			u := p.NewIU(num(i))
			if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
				return err
			}
		}
		close(sentAll)
		// Keep running like a live source until the network stops.
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			if ev.Kind == EventInputDone {
				return nil
			}
		}
	}}
	gate := make(chan struct{})
	out := make(chan []received, 1)
	snk := sink("sink", out, func() { <-gate })
	n := NewNetwork(WithInboxSize(64))
	if err := n.Add(prod, snk); err != nil {
		t.Fatal(err)
	}
	if err := n.Connect(prod, snk); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	<-sentAll
	cancel() // stop while all the messages are still queued at the sink
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("graceful stop returned %v", err)
	}
	if got := <-out; len(got) != total {
		t.Fatalf("sink got %d of %d in-flight messages before its input ended", len(got), total)
	}
}

func TestStopGraceCancelsStuckModule(t *testing.T) {
	stuck := ModuleFunc{ModuleName: "stuck", Fn: func(ctx context.Context, p *Ports) error {
		<-ctx.Done() // ignores the graceful stop; only its context ends it
		return ctx.Err()
	}}
	n := NewNetwork(WithStopGrace(50 * time.Millisecond))
	if err := n.Add(stuck); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.Run(ctx); err != nil {
		t.Fatalf("Run = %v; a module that returns its context's error during a stop is not a failure", err)
	}
}

func TestBuildErrors(t *testing.T) {
	n := NewNetwork()
	a, b := source("a", 1), source("b", 1)
	if err := n.Add(a, b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"duplicate name", n.Add(source("a", 1))},
		{"slash in name", n.Add(source("x/y", 1))},
		{"unknown producer", n.ConnectNames("nope", "a")},
		{"self loop", n.Connect(a, a)},
	} {
		if tc.err == nil {
			t.Errorf("%s: want error", tc.name)
		}
	}
	if err := n.Connect(a, b); err != nil {
		t.Fatal(err)
	}
	if err := n.Connect(a, b); err == nil {
		t.Error("double connect: want error")
	}
}

func TestWorkersAndPost(t *testing.T) {
	m := ModuleFunc{ModuleName: "m", Fn: func(ctx context.Context, p *Ports) error {
		p.Go(func(w Worker) {
			for i := 0; i < 3; i++ {
				if err := w.Post(ctx, i); err != nil {
					return
				}
			}
		})
		for want := 0; want < 3; want++ {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			if ev.Kind != EventLocal || ev.Local.(int) != want {
				return fmt.Errorf("event %+v, want local %d", ev, want)
			}
		}
		return nil
	}}
	n := NewNetwork()
	if err := n.Add(m); err != nil {
		t.Fatal(err)
	}
	mustRun(t, n)
}

func TestTimelineRecordsEveryUpdate(t *testing.T) {
	var buf bytes.Buffer
	start := time.Now()
	tl := NewTimeline(&buf, start)
	out := make(chan []received, 1)
	n := NewNetwork(WithObserver(tl))
	src, snk := source("src", 5), sink("sink", out, nil)
	if err := n.Add(src, snk); err != nil {
		t.Fatal(err)
	}
	if err := n.Connect(src, snk); err != nil {
		t.Fatal(err)
	}
	mustRun(t, n)
	<-out
	if err := tl.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := ReadTimeline(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 10 {
		t.Fatalf("timeline has %d entries, want 10 (5 ADD + 5 COMMIT)", len(entries))
	}
	for i, e := range entries {
		wantType := Add
		if i%2 == 1 {
			wantType = Commit
		}
		if e.Module != "src" || e.Type != wantType || e.Kind != "num" || e.Payload != fmt.Sprint(i/2) {
			t.Errorf("entry %d = %+v", i, e)
		}
		if i >= 2 && e.Previous != entries[i-2].IU {
			t.Errorf("entry %d previous %q, want %q", i, e.Previous, entries[i-2].IU)
		}
	}
}

// ticker emits one IU every period on the network clock, n times.
func ticker(name string, period time.Duration, n int) Module {
	return ModuleFunc{ModuleName: name, Fn: func(ctx context.Context, p *Ports) error {
		start := p.Now()
		for i := 0; i < n; i++ {
			deadline := start.Add(time.Duration(i+1) * period)
			for {
				ev, err := p.Next(ctx, deadline)
				if err != nil {
					return err
				}
				if ev.Kind == EventDeadline {
					break
				}
			}
			u := p.NewIU(num(i))
			if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
				return err
			}
		}
		return nil
	}}
}

func TestVirtualClockRunsFastAndDeterministically(t *testing.T) {
	run := func() []float64 {
		start := time.Unix(1000, 0)
		vc := clock.NewVirtual(start)
		defer vc.Close()
		var times []float64
		// The consumer does slow real work on a worker for every message; virtual time
		// must not move while it works.
		worker := working("work", 2*time.Millisecond, func(p *Ports, _ IU) any { return p.Now() },
			func(_ context.Context, p *Ports, v any) error {
				if sentAt := v.(time.Time); !p.Now().Equal(sentAt) {
					return fmt.Errorf("virtual time moved from %v to %v while a worker ran", sentAt, p.Now())
				}
				times = append(times, p.Now().Sub(start).Seconds())
				return nil
			})
		n := NewNetwork(WithClock(vc))
		tk := ticker("tick", time.Second, 20)
		if err := n.Add(tk, worker); err != nil {
			t.Fatal(err)
		}
		if err := n.Connect(tk, worker); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		mustRun(t, n)
		if real := time.Since(began); real > 5*time.Second {
			t.Fatalf("20 virtual seconds took %v of real time", real)
		}
		return times
	}
	first, second := run(), run()
	if len(first) != 20 {
		t.Fatalf("got %d ticks, want 20", len(first))
	}
	for i := range first {
		if first[i] != float64(i+1) || second[i] != first[i] {
			t.Fatalf("tick %d at %v and %v virtual seconds, want %d both times", i, first[i], second[i], i+1)
		}
	}
}

// TestVirtualClockOrdersModulesWokenTogether: two modules woken by one message send to
// a third, the one added first after real work and the other at once; on a virtual
// clock the third takes the first one's message first on every tick, as it would if both
// took the same time (run alone, with -race and under load alike).
func TestVirtualClockOrdersModulesWokenTogether(t *testing.T) {
	relay := func(name string, work time.Duration) Module {
		return ModuleFunc{ModuleName: name, Fn: func(ctx context.Context, p *Ports) error {
			for {
				ev, err := p.Next(ctx, time.Time{})
				if err != nil || ev.Kind == EventInputDone {
					return err
				}
				time.Sleep(work)
				for _, up := range ev.Message.Updates {
					if up.Type == Add {
						u := p.NewIU(up.IU.Payload)
						if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
							return err
						}
					}
				}
			}
		}}
	}
	vc := clock.NewVirtual(time.Unix(1000, 0))
	defer vc.Close()
	out := make(chan []received, 1)
	tk, slow, quick, sk := ticker("tick", time.Second, 10), relay("slow", 3*time.Millisecond), relay("quick", 0), sink("sink", out, nil)
	n := NewNetwork(WithClock(vc))
	if err := n.Add(tk, slow, quick, sk); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]Module{{tk, slow}, {tk, quick}, {slow, sk}, {quick, sk}} {
		if err := n.Connect(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, n)
	got := <-out
	if len(got) != 20 {
		t.Fatalf("the sink got %d messages, want 20", len(got))
	}
	for i, r := range got {
		if want := []string{"slow", "quick"}[i%2]; r.from != want || r.value != i/2 {
			t.Fatalf("message %d came from %s (%d), want %s (%d): %v", i, r.from, r.value, want, i/2, got)
		}
	}
}

// TestVirtualClockOrdersWorkersOfAModule: two workers of one module post at one
// instant, the one started first after real work; on a virtual clock the module takes
// their results in the order it started them.
func TestVirtualClockOrdersWorkersOfAModule(t *testing.T) {
	vc := clock.NewVirtual(time.Unix(1000, 0))
	defer vc.Close()
	var got []string
	m := ModuleFunc{ModuleName: "m", Fn: func(ctx context.Context, p *Ports) error {
		for round := 0; round < 5; round++ {
			p.Go(func(w Worker) {
				time.Sleep(3 * time.Millisecond)
				_ = w.Post(ctx, "first")
			})
			p.Go(func(w Worker) { _ = w.Post(ctx, "second") })
			for range 2 {
				ev, err := p.Next(ctx, time.Time{})
				if err != nil {
					return err
				}
				got = append(got, ev.Local.(string))
			}
		}
		return nil
	}}
	n := NewNetwork(WithClock(vc))
	if err := n.Add(m); err != nil {
		t.Fatal(err)
	}
	mustRun(t, n)
	for i, v := range got {
		if want := []string{"first", "second"}[i%2]; v != want {
			t.Fatalf("result %d was %q, want %q: %v", i, v, want, got)
		}
	}
}

// TestModuleEndingEarlyDoesNotHoldVirtualTime: a module that returns before its input
// ended (its work was done) must not freeze a virtual clock with what its producers
// still send it: the ticks after its end keep coming on time.
func TestModuleEndingEarlyDoesNotHoldVirtualTime(t *testing.T) {
	start := time.Unix(1000, 0)
	vc := clock.NewVirtual(start)
	defer vc.Close()
	early := ModuleFunc{ModuleName: "early", Fn: func(ctx context.Context, p *Ports) error {
		for n := 0; n < 3; {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			if ev.Kind == EventMessage {
				n++
			}
		}
		return nil // done after three ticks, though ten come
	}}
	var last time.Duration
	late := lastArrival("late", start, &last)
	n := NewNetwork(WithClock(vc))
	tk := ticker("tick", time.Second, 10)
	if err := n.Add(tk, early, late); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Module{early, late} {
		if err := n.Connect(tk, c); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, n)
	if last != 10*time.Second {
		t.Fatalf("the last tick came at %v, want 10s", last)
	}
}

// TestWorkerResultsMeetTheirModulesInRankOrder: on a virtual clock two modules work on
// the same tick, one slowly and one at once; their results reach a common consumer in
// the order of the network (the slow one was added first), not in the order the work
// happened to end, so a replay gives the same sequence on a loaded machine.
func TestWorkerResultsMeetTheirModulesInRankOrder(t *testing.T) {
	passOn := func(ctx context.Context, p *Ports, v any) error {
		u := p.NewIU(v.(num))
		return p.Send(ctx, AddOf(u), CommitOf(u))
	}
	payload := func(_ *Ports, u IU) any { return u.Payload }
	vc := clock.NewVirtual(time.Unix(1000, 0))
	defer vc.Close()
	n := NewNetwork(WithClock(vc))
	tk := ticker("tick", time.Second, 3)
	slow, quick := working("slow", 20*time.Millisecond, payload, passOn), working("quick", 0, payload, passOn)
	out := make(chan []received, 1)
	last := sink("last", out, nil)
	if err := n.Add(tk, slow, quick, last); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]Module{{tk, slow}, {tk, quick}, {slow, last}, {quick, last}} {
		if err := n.Connect(c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, n)
	got := <-out
	want := []received{{"slow", 0}, {"quick", 0}, {"slow", 1}, {"quick", 1}, {"slow", 2}, {"quick", 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("the consumer received %v, want %v", got, want)
	}
}

// TestCycleOfFullInboxesDoesNotDeadlock: two modules of a cycle each send faster than
// the other reads (the manager telling the speaker to stop while the speaker reports its
// progress): with bounded inboxes both ways each would wait on the other's full inbox.
// The edge that closes the cycle never blocks, and nothing is lost or reordered.
func TestCycleOfFullInboxesDoesNotDeadlock(t *testing.T) {
	const requests, repliesEach = 40, 5
	var got []int
	asker := ModuleFunc{ModuleName: "asker", Fn: func(ctx context.Context, p *Ports) error {
		for i := 0; i < requests; i++ { // all of them before reading a reply
			u := p.NewIU(num(i))
			if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
				return err
			}
		}
		for len(got) < requests*repliesEach {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			for _, up := range ev.Message.Updates {
				if up.Type == Add {
					got = append(got, int(up.IU.Payload.(num)))
				}
			}
		}
		return nil
	}}
	replier := ModuleFunc{ModuleName: "replier", Fn: func(ctx context.Context, p *Ports) error {
		next := 0
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil || ev.Kind == EventInputDone {
				return err
			}
			for range repliesEach {
				u := p.NewIU(num(next))
				next++
				if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
					return err
				}
			}
		}
	}}
	n := NewNetwork(WithInboxSize(1))
	if err := n.Add(asker, replier); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]Module{{asker, replier}, {replier, asker}} {
		if err := n.Connect(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := n.FeedbackEdges(), [][2]string{{"replier", "asker"}}; !slices.Equal(got, want) {
		t.Fatalf("feedback edges %v, want %v: the edge back to the module added first", got, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("the cycle deadlocked: the network ran until its context ended")
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("reply %d is %d: replies were lost or reordered (%v)", i, v, got)
		}
	}
}

// TestEndOfInputWaitsForFeedbackMessages: a producer on a feedback edge ends before the
// consumer's last other producer, whose end of input reaches the inbox while the relay
// still holds the first one's messages. The consumer still gets all of them before
// EventInputDone.
func TestEndOfInputWaitsForFeedbackMessages(t *testing.T) {
	const total = 30
	for round := 0; round < 20; round++ {
		fedBackDone := make(chan struct{})
		out := make(chan []received, 1)
		// consumer -> echoer makes echoer -> consumer a feedback edge (consumer is first).
		consumer := ModuleFunc{ModuleName: "consumer", Fn: func(ctx context.Context, p *Ports) error {
			<-fedBackDone
			time.Sleep(10 * time.Millisecond) // let the last producer's end of input arrive
			return sink("inner", out, nil).Run(ctx, p)
		}}
		echoer := ModuleFunc{ModuleName: "echoer", Fn: func(ctx context.Context, p *Ports) error {
			defer close(fedBackDone)
			return source("", total).Run(ctx, p)
		}}
		last := ModuleFunc{ModuleName: "last", Fn: func(ctx context.Context, p *Ports) error {
			<-fedBackDone
			time.Sleep(2 * time.Millisecond) // end after the echoer
			return nil
		}}
		n := NewNetwork()
		if err := n.Add(consumer, echoer, last); err != nil {
			t.Fatal(err)
		}
		for _, l := range [][2]Module{{consumer, echoer}, {echoer, consumer}, {last, consumer}} {
			if err := n.Connect(l[0], l[1]); err != nil {
				t.Fatal(err)
			}
		}
		mustRun(t, n)
		if got := <-out; len(got) != total {
			t.Fatalf("round %d: the consumer got %d messages before the end of its input, want %d", round, len(got), total)
		}
	}
}

// TestFeedbackToAnEndedModuleDoesNotHoldVirtualTime: a module of a cycle ends while
// messages fed back to it are still queued for it; on a virtual clock they must not hold
// time still (each is a unit of work until taken), or the ticks after would never come.
func TestFeedbackToAnEndedModuleDoesNotHoldVirtualTime(t *testing.T) {
	start := time.Unix(1000, 0)
	vc := clock.NewVirtual(start)
	defer vc.Close()
	early := ModuleFunc{ModuleName: "early", Fn: func(ctx context.Context, p *Ports) error {
		for ticks := 0; ticks < 3; {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			if ev.Kind == EventMessage && ev.Message.From == "tick" {
				ticks++
				u := p.NewIU(num(ticks))
				if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
					return err
				}
			}
		}
		// Still running (virtual time stands still), let the echoes of the third tick
		// reach the relay; then end without taking them.
		time.Sleep(20 * time.Millisecond)
		return nil
	}}
	echo := ModuleFunc{ModuleName: "echo", Fn: func(ctx context.Context, p *Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil || ev.Kind == EventInputDone {
				return err
			}
			if ev.Kind != EventMessage {
				continue
			}
			for i := 0; i < 5; i++ {
				u := p.NewIU(num(i))
				if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
					return err
				}
			}
		}
	}}
	var last time.Duration
	late := lastArrival("late", start, &last)
	tk := ticker("tick", time.Second, 10)
	n := NewNetwork(WithClock(vc))
	if err := n.Add(early, echo, late, tk); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]Module{{tk, early}, {tk, echo}, {tk, late}, {early, echo}, {echo, early}} {
		if err := n.Connect(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if last != 10*time.Second {
		t.Fatalf("the last tick came at %v, want 10s", last)
	}
}

// TestModuleEndingEarlyLeavesNoGoroutine: a module that ends before its input does has
// what its producers still send taken for it, until they have all ended; nothing of it
// stays behind after the network's run, whether it had producers or none.
func TestModuleEndingEarlyLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	for range 5 {
		quitter := ModuleFunc{ModuleName: "quitter", Fn: func(ctx context.Context, p *Ports) error {
			_, err := p.Next(ctx, time.Time{}) // one message, then done
			return err
		}}
		idle := ModuleFunc{ModuleName: "idle", Fn: func(ctx context.Context, p *Ports) error { return nil }}
		n := NewNetwork(WithInboxSize(2))
		if err := n.Add(source("src", 50), quitter, idle); err != nil {
			t.Fatal(err)
		}
		if err := n.Connect(n.byName["src"].module, quitter); err != nil {
			t.Fatal(err)
		}
		mustRun(t, n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines before five runs, %d after", before, after)
	}
}

// TestFailedProducerStillEndsItsConsumersInput: a producer that fails after sending
// ends its consumer's input in band before its error cancels the network, so that a
// consumer that reads on (a microphone's collector) gets everything sent and then
// EventInputDone, not the cancellation.
func TestFailedProducerStillEndsItsConsumersInput(t *testing.T) {
	boom := errors.New("boom")
	prod := ModuleFunc{ModuleName: "prod", Fn: func(ctx context.Context, p *Ports) error {
		for i := 0; i < 5; i++ {
			u := p.NewIU(num(i))
			if err := p.Send(ctx, AddOf(u), CommitOf(u)); err != nil {
				return err
			}
		}
		return boom
	}}
	got, ended := 0, false
	cons := ModuleFunc{ModuleName: "cons", Fn: func(ctx context.Context, p *Ports) error {
		time.Sleep(50 * time.Millisecond) // the producer has failed, and the network cancelled its modules
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case EventMessage:
				got++
			case EventInputDone:
				ended = true
				return nil
			}
		}
	}}
	n := NewNetwork()
	if err := n.Add(prod, cons); err != nil {
		t.Fatal(err)
	}
	if err := n.Connect(prod, cons); err != nil {
		t.Fatal(err)
	}
	if err := n.Run(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("network error %v, want the producer's", err)
	}
	if got != 5 || !ended {
		t.Fatalf("the consumer got %d of 5 messages, end of input %v", got, ended)
	}
}
