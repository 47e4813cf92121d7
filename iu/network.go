package iu

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-voice/parley/clock"
	"go.uber.org/zap"
)

// Module is one processing step of a network. Run is called once, on the module's own
// goroutine, and returns when the module is finished: nil after its input ended or the
// network stopped, an error to stop the whole network.
type Module interface {
	Name() string
	Run(ctx context.Context, p *Ports) error
}

// ModuleFunc turns a function into a Module.
type ModuleFunc struct {
	ModuleName string
	Fn         func(ctx context.Context, p *Ports) error
}

// Name implements Module.
func (m ModuleFunc) Name() string { return m.ModuleName }

// Run implements Module.
func (m ModuleFunc) Run(ctx context.Context, p *Ports) error { return m.Fn(ctx, p) }

// Observer sees every batch a module sends, in the order that module sent them, before
// any consumer does. Observe is called on the sending module's goroutine; an observer
// that blocks slows the network down rather than losing updates.
type Observer interface {
	Observe(at time.Time, m Message)
}

// ModuleError is the error that stopped a network, with the module that reported it.
type ModuleError struct {
	Module string
	Err    error
}

func (e *ModuleError) Error() string { return "module " + e.Module + ": " + e.Err.Error() }
func (e *ModuleError) Unwrap() error { return e.Err }

// DefaultInboxSize is how many messages a module's inbox holds before senders block.
const DefaultInboxSize = 64

// Option configures a Network.
type Option func(*Network)

// WithClock sets the clock every module sees (the real clock by default).
func WithClock(c clock.Clock) Option { return func(n *Network) { n.clock = c } }

// WithLogger sets the logger; each module gets a child named after it.
func WithLogger(l *zap.Logger) Option { return func(n *Network) { n.log = l } }

// WithObserver adds an observer of every update (for example a Timeline).
func WithObserver(o Observer) Option {
	return func(n *Network) { n.observers = append(n.observers, o) }
}

// WithInboxSize sets the default inbox size (at least 1).
func WithInboxSize(size int) Option {
	return func(n *Network) {
		if size > 0 {
			n.inboxSize = size
		}
	}
}

// WithStopGrace sets how long modules may take to drain after the network's context is
// cancelled before their own contexts are cancelled too (2 s by default).
func WithStopGrace(d time.Duration) Option { return func(n *Network) { n.stopGrace = d } }

// WithCPUAccounting makes the network count the CPU time each module's goroutine and
// workers use (Network.CPU). Each runs locked to an OS thread while it works (a worker for
// its whole life, a module's goroutine between the waits of Next), and that thread's CPU
// clock says what the module used, its engines' calls included (but not threads those
// engines start, such as ggml's OpenMP workers, or an audio device's callback thread).
// A wait that blocks while locked (a Send to a full inbox) costs a thread switch.
func WithCPUAccounting() Option { return func(n *Network) { n.measureCPU = true } }

// Network connects modules. Build it with Add and Connect, then Run it once.
type Network struct {
	clock     clock.Clock
	sched     clock.Scheduler // non-nil for virtual clocks
	baton     *baton          // non-nil for virtual clocks, from Run on
	log       *zap.Logger
	observers []Observer
	inboxSize int
	stopGrace time.Duration

	measureCPU bool

	nodes  []*node
	byName map[string]*node
	ran    bool

	stopping chan struct{} // closed when the network starts its graceful stop
}

type node struct {
	module    Module
	rank      int // its place in the network's order (Add), which orders it on a virtual clock
	consumers []*node
	producers int
	// feedback[i] says that the edge to consumers[i] closes a cycle (markFeedbackEdges):
	// its messages go through the consumer's relay, and sending them never blocks.
	feedback []bool

	inbox chan Message
	relay *relay        // nil unless a feedback edge ends here
	live  atomic.Int32  // producers still running
	done  chan struct{} // closed when the module returned
	cpu   atomic.Int64  // nanoseconds of CPU its goroutines used (WithCPUAccounting)
	bs    batonState    // on a virtual clock: its queue, in place of inbox and relay
}

// NewNetwork returns an empty network.
func NewNetwork(opts ...Option) *Network {
	n := &Network{
		clock:     clock.Real{},
		log:       zap.NewNop(),
		inboxSize: DefaultInboxSize,
		stopGrace: 2 * time.Second,
		byName:    make(map[string]*node),
		stopping:  make(chan struct{}),
	}
	for _, o := range opts {
		o(n)
	}
	if s, ok := n.clock.(clock.Scheduler); ok {
		n.sched = s
	}
	return n
}

// Clock returns the network's clock.
func (n *Network) Clock() clock.Clock { return n.clock }

// Add adds modules; names must be unique and must not contain '/'.
func (n *Network) Add(modules ...Module) error {
	for _, m := range modules {
		name := m.Name()
		if name == "" {
			return errors.New("iu: module with empty name")
		}
		for _, r := range name {
			if r == '/' {
				return fmt.Errorf("iu: module name %q contains '/'", name)
			}
		}
		if _, dup := n.byName[name]; dup {
			return fmt.Errorf("iu: module %q added twice", name)
		}
		nd := &node{module: m, rank: len(n.nodes), done: make(chan struct{})}
		n.nodes = append(n.nodes, nd)
		n.byName[name] = nd
	}
	return nil
}

// Connect makes consumer receive everything producer sends. A producer may feed several
// consumers and a consumer may read several producers.
func (n *Network) Connect(producer, consumer Module) error {
	return n.ConnectNames(producer.Name(), consumer.Name())
}

// FeedbackEdges returns the edges Run will send over without blocking, one in every
// cycle of the network as connected so far (markFeedbackEdges), as producer and consumer
// names.
func (n *Network) FeedbackEdges() [][2]string {
	n.markFeedbackEdges()
	var edges [][2]string
	for _, nd := range n.nodes {
		for i, c := range nd.consumers {
			if nd.feedback[i] {
				edges = append(edges, [2]string{nd.module.Name(), c.module.Name()})
			}
		}
	}
	return edges
}

// ConnectNames is Connect by module name.
func (n *Network) ConnectNames(producer, consumer string) error {
	p, c := n.byName[producer], n.byName[consumer]
	if p == nil {
		return fmt.Errorf("iu: connect: no module %q", producer)
	}
	if c == nil {
		return fmt.Errorf("iu: connect: no module %q", consumer)
	}
	if p == c {
		return fmt.Errorf("iu: connect: module %q to itself", producer)
	}
	for _, existing := range p.consumers {
		if existing == c {
			return fmt.Errorf("iu: connect: %q to %q twice", producer, consumer)
		}
	}
	p.consumers = append(p.consumers, c)
	c.producers++
	return nil
}

// markFeedbackEdges finds, for every cycle of the network, an edge that closes it: the
// edges a depth-first search in the order of Add and Connect reaches a module still on its
// path by. Every cycle holds one, and with those edges never blocking, modules of a
// cycle cannot all wait on each other's full inboxes: the manager sending to the speaker
// while the speaker sends to the manager. The search starts at the module added first,
// whose edges are never among them (the agent adds its microphone first).
func (n *Network) markFeedbackEdges() {
	const (
		unseen = iota
		onPath
		finished
	)
	state := make(map[*node]int, len(n.nodes))
	var visit func(nd *node)
	visit = func(nd *node) {
		state[nd] = onPath
		nd.feedback = make([]bool, len(nd.consumers))
		for i, c := range nd.consumers {
			switch state[c] {
			case unseen:
				visit(c)
			case onPath:
				nd.feedback[i] = true
			}
		}
		state[nd] = finished
	}
	for _, nd := range n.nodes {
		if state[nd] == unseen {
			visit(nd)
		}
	}
}

// Run starts every module on its own goroutine and waits until all have returned.
//
// Cancelling ctx stops the network gracefully: every module receives what is already in
// its inbox and then an EventInputDone, and has the stop grace period to return before
// its context is cancelled. The first module error cancels every module at once, and Run
// returns it as a *ModuleError.
func (n *Network) Run(ctx context.Context) error {
	if n.ran {
		return errors.New("iu: network already ran")
	}
	n.ran = true
	n.markFeedbackEdges()
	if n.sched != nil {
		n.baton = newBaton(n.nodes)
	}
	for _, nd := range n.nodes {
		for i, c := range nd.consumers {
			if nd.feedback[i] && c.relay == nil {
				c.relay = newRelay()
			}
		}
	}
	for _, nd := range n.nodes {
		nd.inbox = make(chan Message, n.inboxSize)
		nd.live.Store(int32(nd.producers))
		if nd.relay != nil && n.baton == nil {
			go nd.relay.run(nd.done)
		}
	}

	modCtx, cancelModules := context.WithCancelCause(context.Background())
	defer cancelModules(nil)

	var (
		firstErr  error
		errOnce   sync.Once
		wg        sync.WaitGroup
		allDone   = make(chan struct{})
		graceStop = make(chan struct{})
	)
	fail := func(name string, err error) {
		errOnce.Do(func() {
			firstErr = &ModuleError{Module: name, Err: err}
			// Run returns the error and its caller reports it: at a higher level the
			// user would read it twice.
			n.log.Debug("module failed; stopping network", zap.String("module", name), zap.Error(err))
			cancelModules(firstErr)
		})
	}

	if n.sched != nil {
		for range n.nodes {
			n.sched.Begin() // each module's goroutine counts as running from the start
		}
		n.baton.begin()
	}
	for _, nd := range n.nodes {
		wg.Add(1)
		p := n.newPorts(nd)
		go func() {
			defer wg.Done()
			p.working()
			defer p.idle()
			err := p.run(modCtx)
			if err != nil && !(modCtx.Err() != nil && errors.Is(err, modCtx.Err())) {
				fail(nd.module.Name(), err)
			}
		}()
	}
	go func() { wg.Wait(); close(allDone) }()

	select {
	case <-allDone:
	case <-ctx.Done():
		close(n.stopping)
		timer := time.NewTimer(n.stopGrace)
		go func() {
			select {
			case <-timer.C:
				cancelModules(fmt.Errorf("iu: modules still running %v after stop", n.stopGrace))
			case <-allDone:
				timer.Stop()
			}
			close(graceStop)
		}()
		<-allDone
		<-graceStop
	}
	return firstErr
}

// CPU returns the CPU time each module used so far, by name; nil unless the network was
// made WithCPUAccounting or the system cannot tell.
func (n *Network) CPU() map[string]time.Duration {
	if !n.measureCPU {
		return nil
	}
	if _, ok := threadCPU(); !ok {
		return nil
	}
	out := make(map[string]time.Duration, len(n.nodes))
	for _, nd := range n.nodes {
		out[nd.module.Name()] = time.Duration(nd.cpu.Load())
	}
	return out
}

// accountCPU, when the network counts CPU time, locks the calling goroutine to its
// thread and returns the function that adds what the thread used since to nd's count and
// unlocks it.
func (n *Network) accountCPU(nd *node) func() {
	if !n.measureCPU {
		return func() {}
	}
	runtime.LockOSThread()
	start, ok := threadCPU()
	return func() {
		if end, ok2 := threadCPU(); ok && ok2 {
			nd.cpu.Add(int64(end - start))
		}
		runtime.UnlockOSThread()
	}
}

// working and idle bracket the stretches in which the module's goroutine runs, between
// the waits of Next, when the network counts CPU time: the goroutine is locked to its
// thread only while it works, so that its thread's CPU clock is its own, and a wait
// ends as any goroutine's does. Locked while it waits too, each message would wake a
// thread of its own, and the handovers would cost the small modules more than their
// work does (a cost users, who run without the counts, never pay).
func (p *Ports) working() { p.stopWork = p.net.accountCPU(p.node) }

func (p *Ports) idle() { p.stopWork() }

func (n *Network) newPorts(nd *node) *Ports {
	name := nd.module.Name()
	return &Ports{
		net:   n,
		node:  nd,
		out:   newOutput(name),
		log:   n.log.Named(name),
		local: make(chan any, n.inboxSize),
	}
}

// Ports is a module's connection to its network: its inbox, its output and its clock.
// Its methods are for the module's goroutine, except TryPost.
type Ports struct {
	net  *Network
	node *node
	out  *output
	log  *zap.Logger

	local   chan any
	workers sync.WaitGroup
	started uint64 // workers started (Go), which orders their posts
	// stopWork ends the count of the module's goroutine's current stretch of work (see
	// working).
	stopWork func()

	inputDone  bool // EventInputDone was delivered
	inputEnded bool // every producer ended; EventInputDone follows once nothing is queued
}

// EventKind says what Next returned.
type EventKind uint8

const (
	// EventMessage is a message from a producer.
	EventMessage EventKind = iota + 1
	// EventLocal is a value posted by the module's own workers or callbacks.
	EventLocal
	// EventDeadline means the deadline given to Next has passed.
	EventDeadline
	// EventInputDone means every producer finished (or the network is stopping) and the
	// inbox is empty. It is delivered once; later calls to Next still deliver local events
	// and deadlines.
	EventInputDone
)

// Event is what Next returns.
type Event struct {
	Kind    EventKind
	Message Message
	Local   any
}

func (p *Ports) run(ctx context.Context) error {
	nd := p.node
	ctx, cancel := context.WithCancel(ctx)
	b := p.net.baton
	defer func() {
		cancel()
		p.workers.Wait()
		close(nd.done)
		for i, c := range nd.consumers {
			if c.live.Add(-1) == 0 {
				// The last producer tells the consumer, after everything it sent; the
				// consumer takes what other producers' feedback edges still hold first.
				p.deliver(context.Background(), i, Message{endOfInput: true})
			}
		}
		if b != nil {
			// What is queued for it is nobody's work now; the baton goes on.
			b.end(nd, p.net.endUnit)
		}
		p.end() // this goroutine stops running
	}()
	if b != nil {
		if err := b.waitStart(ctx, nd); err != nil {
			return err
		}
	}
	return nd.module.Run(ctx, p)
}

// deliver puts m into the inbox of the module's i-th consumer, or its relay if the edge
// is a feedback edge; on a virtual clock the message is a unit of work from now until
// the consumer takes it.
func (p *Ports) deliver(ctx context.Context, i int, m Message) error {
	c := p.node.consumers[i]
	if b := p.net.baton; b != nil {
		b.deliver(c, m, p.begin)
		return nil
	}
	select {
	case <-c.done:
		return nil // the consumer is gone
	default:
	}
	to, feedback := c.inbox, p.node.feedback[i]
	if feedback {
		// Counted before it can be taken, so that the consumer cannot miss it (drained).
		to = c.relay.in
		c.relay.pending.Add(1)
	}
	p.begin()
	var err error
	select {
	case to <- m:
		return nil
	case <-c.done: // the consumer is gone
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.end() // nothing is in flight
	if feedback {
		c.relay.pending.Add(-1)
	}
	return err
}

func (p *Ports) begin() {
	if p.net.sched != nil {
		p.net.sched.Begin()
	}
}

func (p *Ports) end() { p.net.endUnit() }

// endUnit ends a unit of work on a virtual clock.
func (n *Network) endUnit() {
	if n.sched != nil {
		n.sched.End()
	}
}

// Name returns the module's name.
func (p *Ports) Name() string { return p.node.module.Name() }

// Clock returns the network's clock.
func (p *Ports) Clock() clock.Clock { return p.net.clock }

// Now is Clock().Now().
func (p *Ports) Now() time.Time { return p.net.clock.Now() }

// Logger returns the module's logger.
func (p *Ports) Logger() *zap.Logger { return p.log }

// HasConsumers reports whether anything reads this module's output.
func (p *Ports) HasConsumers() bool { return len(p.node.consumers) > 0 || len(p.net.observers) > 0 }

// NewIU creates an IU of this module, chained after its previous one. It still has to be
// sent with an ADD. A batch that revokes IUs before adding the new ones that replace
// them chains those after the last IU that survives it.
func (p *Ports) NewIU(payload Payload, groundedIn ...ID) IU {
	return p.out.newIU(p.net.clock.Now(), payload, groundedIn)
}

// Send delivers one batch of updates to every consumer, blocking while a consumer's inbox
// is full (never on a virtual clock, where it is queued: see baton). A batch that breaks
// the IU rules is rejected whole with ErrInvalidUpdate. Consumers that already returned
// (during a stop) no longer receive anything.
func (p *Ports) Send(ctx context.Context, updates ...Update) error {
	if len(updates) == 0 {
		return nil
	}
	checked, err := p.out.apply(updates)
	if err != nil {
		return err
	}
	msg := Message{From: p.Name(), Updates: checked}
	if len(p.net.observers) > 0 {
		now := p.net.clock.Now()
		for _, o := range p.net.observers {
			o.Observe(now, msg)
		}
	}
	for i := range p.node.consumers {
		if err := p.deliver(ctx, i, msg); err != nil {
			return err
		}
	}
	return nil
}

// Go runs fn on a worker goroutine that belongs to the module: the module does not finish
// before its workers do, and on a virtual clock a running worker holds time still. Workers
// hand results back with their Worker's Post; they must not call Send while the module
// might. Go is for the module's own goroutine.
func (p *Ports) Go(fn func(w Worker)) {
	p.workers.Add(1)
	p.begin()
	p.started++
	w := Worker{p: p, seq: p.started}
	go func() {
		defer p.workers.Done()
		defer p.end()
		defer p.net.accountCPU(p.node)()
		fn(w)
	}()
}

// Worker is a worker goroutine of a module (Ports.Go).
type Worker struct {
	p   *Ports
	seq uint64 // the order the module started its workers in
}

// Post hands v to the module's own goroutine, which receives it from Next as an
// EventLocal. It blocks while the local queue is full, until ctx is done. On a virtual
// clock v waits for the end of the instant (clock.Scheduler.Settle; modules added
// earlier go first, and of one module's workers the one it started first): a worker's
// result then meets the same messages at its module on every run, however long the work
// took.
func (w Worker) Post(ctx context.Context, v any) error {
	p := w.p
	if p.net.sched != nil {
		if err := p.net.sched.Settle(ctx, p.node.rank, w.seq); err != nil {
			return err
		}
	}
	p.begin()
	select {
	case p.local <- v:
		return nil
	case <-ctx.Done():
		p.end()
		return ctx.Err()
	}
}

// TryPost hands v to the module's own goroutine at once, never blocking, for real-time
// callbacks; it reports false (and drops v) when the local queue is full.
func (p *Ports) TryPost(v any) bool {
	p.begin()
	select {
	case p.local <- v:
		return true
	default:
		p.end()
		return false
	}
}

// Next waits for the module's next event: a message, a local value, the deadline (when
// it is not zero) or the end of input. Messages already queued are always delivered
// before EventInputDone. It returns an error only when ctx is done.
func (p *Ports) Next(ctx context.Context, deadline time.Time) (Event, error) {
	for {
		ev, ok, err := p.next(ctx, deadline)
		if ok || err != nil {
			return ev, err
		}
	}
}

// next waits once; ok is false when what woke it was not an event for the module (an
// end-of-input marker after a stop already ended the input).
func (p *Ports) next(ctx context.Context, deadline time.Time) (ev Event, ok bool, err error) {
	if p.net.baton != nil {
		return p.nextInTurn(ctx, deadline)
	}
	nd := p.node
	var relayed chan Message
	if nd.relay != nil {
		relayed = nd.relay.out
	}
	// Events that are ready now, without giving up the goroutine's running state.
	select {
	case m := <-nd.inbox:
		p.end() // the message's unit of work merges into this running goroutine
		return p.received(m)
	case m := <-relayed:
		nd.relay.pending.Add(-1)
		p.end()
		return p.received(m)
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
	// While blocked this goroutine is idle; a message, local value or timer that wakes it
	// brings its own unit of work along.
	p.end()
	p.idle()
	defer p.working()
	select {
	case m := <-nd.inbox:
		stopTimer()
		return p.received(m)
	case m := <-relayed:
		nd.relay.pending.Add(-1)
		stopTimer()
		return p.received(m)
	case v := <-p.local:
		stopTimer()
		return Event{Kind: EventLocal, Local: v}, true, nil
	case <-timerC:
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

// waitFor is what a wait in Next watches besides the module's queues: the network's
// stop (nil once it no longer matters) and the deadline's timer (nil: none).
type waitFor struct {
	stopping <-chan struct{}
	timer    clock.Timer
}

func (w waitFor) timerC() <-chan time.Time {
	if w.timer == nil {
		return nil
	}
	return w.timer.C()
}

func (w waitFor) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// beforeWait returns the event that is due without a wait once nothing is queued (ok:
// the end of input, a deadline passed), or ctx's error, or else what the wait watches.
func (p *Ports) beforeWait(ctx context.Context, deadline time.Time) (ev Event, ok bool, w waitFor, err error) {
	if p.inputEnded && !p.inputDone && p.drained() {
		// Before ctx: a producer that failed sent its end of input before the network
		// cancelled every module, and what it sent is delivered.
		p.inputDone = true
		return Event{Kind: EventInputDone}, true, w, nil
	}
	if err := ctx.Err(); err != nil {
		return Event{}, false, w, err
	}
	w.stopping = p.net.stopping
	if p.inputDone {
		w.stopping = nil
	} else if p.inputEnded || p.stopRequested() {
		if p.drained() {
			p.inputDone = true
			return Event{Kind: EventInputDone}, true, w, nil
		}
		w.stopping = nil // what is still queued comes first
	}
	if !deadline.IsZero() {
		d := deadline.Sub(p.net.clock.Now())
		if d <= 0 {
			return Event{Kind: EventDeadline}, true, w, nil
		}
		if p.net.sched != nil {
			w.timer = p.net.sched.NewWakeTimer(d, p.node.rank)
		} else {
			w.timer = p.net.clock.NewTimer(d)
		}
	}
	return Event{}, false, w, nil
}

// received makes m an event. The end of input becomes one once nothing is queued: a
// feedback edge's relay may still hold messages of producers that ended before.
func (p *Ports) received(m Message) (Event, bool, error) {
	if m.endOfInput {
		if p.inputDone {
			return Event{}, false, nil
		}
		p.inputEnded = true
		if !p.drained() {
			return Event{}, false, nil
		}
		p.inputDone = true
		return Event{Kind: EventInputDone}, true, nil
	}
	return Event{Kind: EventMessage, Message: m}, true, nil
}

// stopRequested reports whether the network is stopping.
func (p *Ports) stopRequested() bool {
	select {
	case <-p.net.stopping:
		return true
	default:
		return false
	}
}

// drained reports whether nothing sent to the module waits to be taken, in its inbox or
// its relay.
func (p *Ports) drained() bool {
	if b := p.net.baton; b != nil {
		return b.queued(p.node) == 0
	}
	if r := p.node.relay; r != nil && r.pending.Load() > 0 {
		return false
	}
	return len(p.node.inbox) == 0
}

// relay queues a module's messages on feedback edges (markFeedbackEdges): it takes each
// at once, so that its sender never waits, and hands them on in order.
type relay struct {
	in, out chan Message
	pending atomic.Int64 // messages being sent to in, or queued, and not yet taken from out
}

func newRelay() *relay { return &relay{in: make(chan Message), out: make(chan Message)} }

// run queues what comes in until the consumer takes it, or is gone.
func (r *relay) run(consumerDone <-chan struct{}) {
	var queue []Message
	for {
		var out chan Message
		var head Message
		if len(queue) > 0 {
			out, head = r.out, queue[0]
		}
		select {
		case m := <-r.in:
			queue = append(queue, m)
		case out <- head:
			queue[0] = Message{}
			queue = queue[1:]
		case <-consumerDone:
			return
		}
	}
}
