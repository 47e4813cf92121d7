package iu

import (
	"context"
	"sync"
	"time"
)

// baton makes a network on a virtual clock run one module goroutine at a time, in a
// fixed order, so that a replay takes the same course on every run. Without it, two
// modules woken by one message (the VAD and the overlap module hearing the same frame)
// run at once and reach a common consumer in the order they happen to finish.
//
// A module's goroutine runs only while it holds the baton; workers (Ports.Go) run
// beside it, and their results wait for the end of the instant (Worker.Post). What a
// module sends is queued at each consumer, without bound: the holder never waits on a
// consumer that cannot run. When the holder waits in Next again, the baton goes to the
// module added first among those with something to do: queued messages, their start,
// or a deadline or worker's result that woke them while another held it. Who has
// something to do then depends only on what ran before, so the order is the same on
// every run. Messages wait in their consumer's queue as units of tracked work, and the
// holder is one: time moves on only once every queue is empty and every module waits.
type baton struct {
	mu     sync.Mutex
	nodes  []*node // in rank order
	holder *node   // nil: nobody runs
}

// batonState is a node's part of the baton, guarded by baton.mu.
type batonState struct {
	queue []Message
	// starting: the module's goroutine has not run yet; wanting: it was woken by
	// something other than a message while another module held the baton.
	starting, wanting bool
	ended             bool
	grant             chan struct{} // buffered: the baton was handed to the node
}

func newBaton(nodes []*node) *baton {
	b := &baton{nodes: nodes}
	for _, nd := range nodes {
		nd.bs = batonState{starting: true, grant: make(chan struct{}, 1)}
	}
	return b
}

// begin hands the baton to the module added first: modules start one at a time, in
// rank order, each running until it first waits in Next (waitStart).
func (b *baton) begin() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.handLocked(b.nextLocked())
}

// waitStart waits until nd's goroutine may run for the first time.
func (b *baton) waitStart(ctx context.Context, nd *node) error {
	select {
	case <-nd.bs.grant:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// deliver queues m for consumer c, or drops it if c has ended. begin counts the queued
// message as a unit of tracked work, under the lock, so that taking it cannot come
// first.
func (b *baton) deliver(c *node, m Message, begin func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.bs.ended {
		return
	}
	c.bs.queue = append(c.bs.queue, m)
	begin()
	if b.holder == nil {
		// Sent by a goroutine that does not hold the baton (a module stopping): the
		// consumer must not wait for a holder that will not pass it on.
		b.handLocked(b.nextLocked())
	}
}

// take returns nd's next queued message if nd holds the baton and it is nd's turn.
func (b *baton) take(nd *node) (Message, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.holder != nd || len(nd.bs.queue) == 0 || b.nextLocked() != nd {
		return Message{}, false
	}
	m := nd.bs.queue[0]
	nd.bs.queue[0] = Message{}
	nd.bs.queue = nd.bs.queue[1:]
	return m, true
}

// queued reports how many messages wait for nd.
func (b *baton) queued(nd *node) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(nd.bs.queue)
}

// pass hands the baton on, if nd holds it, to the module whose turn it is (nd itself
// when only its own queue is left, which take then serves).
func (b *baton) pass(nd *node) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.passLocked(nd)
}

func (b *baton) passLocked(nd *node) {
	if b.holder == nd {
		b.holder = nil
		b.handLocked(b.nextLocked())
	}
}

// acquire takes the baton for nd, woken by a deadline or a worker's result: at once
// when nobody holds it (the normal case: both come only when every module waits), else
// once it is nd's turn.
func (b *baton) acquire(ctx context.Context, nd *node) error {
	b.mu.Lock()
	if b.holder == nil || b.holder == nd {
		b.holder = nd
		b.mu.Unlock()
		return nil
	}
	nd.bs.wanting = true
	b.mu.Unlock()
	select {
	case <-nd.bs.grant:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		nd.bs.wanting = false
		b.mu.Unlock()
		return ctx.Err()
	}
}

// end marks nd's module as ended: what is queued for it is dropped (each dropped
// message ends its unit of work), nothing more is queued, and the baton goes on if nd
// held it.
func (b *baton) end(nd *node, endUnit func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range nd.bs.queue {
		endUnit()
	}
	nd.bs.queue, nd.bs.ended, nd.bs.starting, nd.bs.wanting = nil, true, false, false
	b.passLocked(nd)
}

// nextLocked is the module whose turn it is: the first added with queued messages, its
// start ahead, or a wake-up waiting (nil: none).
func (b *baton) nextLocked() *node {
	for _, nd := range b.nodes {
		if !nd.bs.ended && (len(nd.bs.queue) > 0 || nd.bs.starting || nd.bs.wanting) {
			return nd
		}
	}
	return nil
}

// handLocked gives the baton to nd (nil: nobody) and wakes it: a holder that passes the
// baton to itself (its own queue next) takes the grant in Next at once.
func (b *baton) handLocked(nd *node) {
	b.holder = nd
	if nd == nil {
		return
	}
	nd.bs.starting, nd.bs.wanting = false, false
	select {
	case nd.bs.grant <- struct{}{}:
	default:
	}
}

// nextInTurn is next on a virtual clock: the module's goroutine runs only while it holds
// the baton, which it passes on when it waits. It takes its queued messages when it is
// their turn (baton.take); a deadline or a worker's result wakes it when every module
// waits, and it takes the baton then.
func (p *Ports) nextInTurn(ctx context.Context, deadline time.Time) (ev Event, ok bool, err error) {
	nd, b := p.node, p.net.baton
	if m, ok := b.take(nd); ok {
		p.end() // the message's unit of work merges into this running goroutine
		return p.received(m)
	}
	select {
	case v := <-p.local:
		p.end()
		return Event{Kind: EventLocal, Local: v}, true, nil
	default:
	}
	ev, ok, w, err := p.beforeWait(ctx, deadline)
	if ok || err != nil {
		return ev, ok, err
	}
	stopping, timerC, stopTimer := w.stopping, w.timerC(), w.stop
	b.pass(nd)
	// While blocked this goroutine is idle; what wakes it brings its own unit of work
	// along, except the baton, after which it takes a queued message (next round).
	p.end()
	p.idle()
	defer p.working()
	select {
	case <-nd.bs.grant:
		stopTimer()
		p.begin()
		return Event{}, false, nil
	case v := <-p.local:
		stopTimer()
		if err := b.acquire(ctx, nd); err != nil {
			return Event{}, false, err
		}
		return Event{Kind: EventLocal, Local: v}, true, nil
	case <-timerC:
		if err := b.acquire(ctx, nd); err != nil {
			return Event{}, false, err
		}
		return Event{Kind: EventDeadline}, true, nil
	case <-stopping:
		p.begin()
		stopTimer()
		return Event{}, false, nil
	case <-ctx.Done():
		p.begin()
		stopTimer()
		return Event{}, false, ctx.Err()
	}
}
