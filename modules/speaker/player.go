package speaker

import (
	"fmt"
	"math"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
)

// item is one audio IU waiting to be played or being played.
type item struct {
	id      iu.ID
	payload Audio
	pcm     audio.Frame // mono, at the item's own rate
	length  int         // the payload's length in sample frames
	turn    int
	hasTurn bool
	fed     int64 // frames handed to the resampler so far
	// held: tentative audio whose IU is not committed yet (see Tentative). It waits, and
	// everything queued behind it waits too.
	held bool
}

// placement says where an item's audio lies in the ring. Within a run (a stretch of
// items at one rate resampled as one stream) output sample j lies at input position
// j·down/up, so the item's input frames [k, k+n) become ring positions
// [r0+⌈k·up/down⌉, r0+⌈(k+n)·up/down⌉): exact, whatever the resampler holds back.
type placement struct {
	it         *item
	r0, k      int64
	up, down   int64
	start, end int64 // ring positions; end is lowered when a cut shortens the item
}

// offset returns how many of the item's samples are heard once the ring positions
// below h have been heard.
func (pl *placement) offset(h int64) int {
	h = min(h, pl.end)
	if h <= pl.start {
		return 0
	}
	x := (h-pl.r0)*pl.down/pl.up - pl.k
	return int(min(max(x, 0), int64(pl.it.pcm.Len())))
}

// resampling is the resampler's state for a run of consecutive items at one rate.
type resampling struct {
	rate     int
	rs       *audio.Resampler // nil when the item rate is the output rate
	r0       int64            // ring position of the run's first output sample
	in       int64            // input frames fed
	up, down int64
}

// request is a control change the writer has asked the renderer to apply and waits to
// see acknowledged.
type request struct {
	seq  uint64
	kind requestKind
	at   int64 // cuts: the requested cut position
	turn int   // interrupts: the turn
	// revoked is the item a revoke cut removes.
	revoked *item
	reason  string
}

type requestKind uint8

const (
	reqPause requestKind = iota + 1
	reqResume
	reqInterrupt
	reqRevoke
)

// player is the ring's writer: it owns the queue, the resampler, the ring's write side
// and the bookkeeping that maps what the listener hears back to audio IUs. Only the
// module's goroutine touches it.
type player struct {
	ring     *Ring
	out      Output
	rate     int
	quality  audio.Quality
	lead     int64 // frames the ring is kept filled ahead of the renderer's read position
	lowWater int64 // below this fill, a finished resampler run is flushed
	start    time.Time
	log      *zap.Logger

	queue   []*item
	run     *resampling // the current run
	pending []float32   // resampler output not yet in the ring (positions w...)
	placed  []*placement
	w       int64

	req      uint64 // last request number published
	inflight *request
	waiting  []request // control requests waiting for the one in flight

	segs      []record
	heard     int64 // ring positions below it have been heard
	idleMark  int64 // heard position when output last went idle or stopped
	state     State
	paused    bool      // as requested (the renderer may not have applied it yet)
	tailUntil time.Time // when the audio the device held at a pause or stop has been heard

	interrupted    bool
	maxInterrupted int

	// gains are the renderer's changes of level, oldest first (the one in force at the
	// heard frame and those after it).
	gains     []gainChange
	lostGains uint64

	underruns   int
	lostRecords uint64
	reports     []Progress
}

func newPlayer(ring *Ring, out Output, quality audio.Quality, lead, step time.Duration, start time.Time, log *zap.Logger) *player {
	rate := out.Rate()
	p := &player{
		ring: ring, out: out, rate: rate, quality: quality, start: start, log: log,
		lead:     audio.DurationToSamples(lead, rate),
		lowWater: audio.DurationToSamples(3*step, rate),
		state:    Idle,
	}
	return p
}

// ringCapacity is how many samples the ring needs for a lead and wake step.
func ringCapacity(rate int, lead, step time.Duration) int {
	return int(audio.DurationToSamples(lead+4*step+100*time.Millisecond, rate))
}

// enqueue queues an audio IU (an ADD).
func (p *player) enqueue(u iu.IU, a Audio) {
	f := a.PCM()
	it := &item{id: u.ID, payload: a, length: f.Len()}
	if t, ok := a.(Tentative); ok && t.IsTentative() {
		it.held = u.State != iu.Committed
	}
	if t, ok := a.(Turned); ok {
		it.turn, it.hasTurn = t.AgentTurn(), true
	}
	if it.hasTurn && p.interrupted && it.turn <= p.maxInterrupted {
		p.log.Debug("dropping audio of an interrupted turn", zap.String("iu", string(u.ID)), zap.Int("turn", it.turn))
		return
	}
	if f.Rate <= 0 || f.Channels <= 0 || f.Len() == 0 {
		if f.Len() > 0 {
			p.log.Warn("ignoring audio without a rate or channel count", zap.String("iu", string(u.ID)), zap.String("audio", f.Summary()))
		}
		return
	}
	it.pcm = audio.Downmix(f)
	p.queue = append(p.queue, it)
}

// release lets committed audio play.
func (p *player) release(id iu.ID) {
	for _, it := range p.queue {
		if it.id == id {
			it.held = false
			return
		}
	}
}

// update replaces the payload of an audio IU that has not started yet.
func (p *player) update(u iu.IU, a Audio) {
	for i, it := range p.queue {
		if it.id == u.ID && it.fed == 0 {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			p.queueAt(i, u, a)
			return
		}
	}
	p.log.Debug("ignoring an update of audio that already plays", zap.String("iu", string(u.ID)))
}

func (p *player) queueAt(i int, u iu.IU, a Audio) {
	rest := append([]*item(nil), p.queue[i:]...)
	p.queue = p.queue[:i]
	p.enqueue(u, a)
	p.queue = append(p.queue, rest...)
}

// revoke drops a revoked audio IU that has not started playing.
func (p *player) revoke(id iu.ID) {
	for i, it := range p.queue {
		if it.id == id && it.fed == 0 {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			return
		}
	}
	for _, pl := range p.placed {
		if pl.it.id != id {
			continue
		}
		if pl.start < p.ring.r.Load() {
			p.log.Debug("revoked audio already plays; letting it finish", zap.String("iu", string(id)))
			return
		}
		// In the ring but not heard: cut the ring at its start, if the renderer has not got there
		// by the time it sees the cut.
		p.submit(request{kind: reqRevoke, at: pl.start, revoked: pl.it, reason: "revoke " + string(id)})
		return
	}
}

// command handles a control command.
func (p *player) command(c control.Command) {
	reason := fmt.Sprintf("%s turn %d", c.Action, c.TurnID)
	if c.Reason != "" {
		reason += ": " + c.Reason
	}
	switch c.Action {
	case control.Pause:
		p.submit(request{kind: reqPause, reason: reason})
	case control.Resume:
		p.submit(request{kind: reqResume, reason: reason})
	case control.Interrupt:
		if !p.interrupted || c.TurnID > p.maxInterrupted {
			p.interrupted, p.maxInterrupted = true, c.TurnID
		}
		p.submit(request{kind: reqInterrupt, turn: c.TurnID, reason: reason})
	case control.Duck:
		p.setGain(float32(math.Pow(10, min(c.Gain, 0)/20)))
	case control.Unduck:
		p.setGain(1)
	}
}

// setGain asks the renderer for a level. It takes effect at the renderer's next render,
// ramped, whatever request is in flight: a level moves no position, so it needs no
// acknowledgement; the renderer's gain records say where each ramp began.
func (p *player) setGain(g float32) {
	if math.Float32frombits(p.ring.gain.Load()) == g {
		return
	}
	p.ring.gain.Store(math.Float32bits(g))
	p.out.Kick()
}

// submit sends a request to the renderer, or queues it behind the one in flight: requests are
// applied one at a time so that each acknowledgement says where that request took effect.
func (p *player) submit(r request) {
	if p.inflight != nil {
		p.waiting = append(p.waiting, r)
		return
	}
	switch r.kind {
	case reqPause:
		p.paused = true
		p.ring.pause.Store(true)
	case reqResume:
		p.paused = false
		p.ring.pause.Store(false)
	case reqInterrupt:
		// Stop reading where the renderer is now; its acknowledgement says exactly where
		// that was.
		r.at = p.ring.r.Load()
		if !p.droppable(p.itemAt(r.at), r.turn) {
			r.at = noLimit // what plays now belongs to a later turn: drop only the queue
		}
		p.paused = false
		p.ring.pause.Store(false)
		p.ring.limit.Store(r.at)
		// The turn ends here; whatever plays next plays at full volume (the ramp back up
		// runs on the silence after the cut).
		p.ring.gain.Store(math.Float32bits(1))
	case reqRevoke:
		p.ring.limit.Store(r.at)
	}
	p.req++
	r.seq = p.req
	p.ring.req.Store(p.req)
	p.inflight = &r
	p.out.Kick()
}

// droppable reports whether an Interrupt of turn drops it.
func (p *player) droppable(it *item, turn int) bool {
	return it == nil || !it.hasTurn || it.turn <= turn
}

// itemAt returns the item whose audio is at ring position x, or the next to play.
func (p *player) itemAt(x int64) *item {
	for _, pl := range p.placed {
		if x < pl.end {
			return pl.it
		}
	}
	if len(p.queue) > 0 {
		return p.queue[0]
	}
	return nil
}

// lift lets the renderer read freely again after a cut; nothing waits for its acknowledgement (a
// later request's acknowledgement covers it).
func (p *player) lift() {
	p.ring.limit.Store(noLimit)
	p.req++
	p.ring.req.Store(p.req)
	p.out.Kick()
}

// cutAt drops the ring's audio from position c on (the renderer is held below c) and requeues
// the items that had not started, except those drop selects. An item cut short in the
// middle has started: its remainder is gone.
func (p *player) cutAt(c int64, drop func(*item) bool) {
	if c > p.w {
		c = p.w
	}
	p.w = c
	p.ring.w.Store(c)
	p.pending = nil
	p.run = nil
	var requeue []*item
	keep := p.placed[:0]
	for _, pl := range p.placed {
		switch {
		case pl.start >= c:
			if !drop(pl.it) {
				pl.it.fed = 0
				requeue = append(requeue, pl.it)
			}
		case pl.end > c:
			pl.end = c
			keep = append(keep, pl)
		default:
			keep = append(keep, pl)
		}
	}
	p.placed = keep
	for _, it := range p.queue {
		if it.fed == 0 && !drop(it) {
			requeue = append(requeue, it)
		}
	}
	p.queue = requeue
}

// dropQueued removes queued items that have not started and that drop selects.
func (p *player) dropQueued(drop func(*item) bool) {
	keep := p.queue[:0]
	for _, it := range p.queue {
		if it.fed > 0 || !drop(it) {
			keep = append(keep, it)
		}
	}
	p.queue = keep
}

// inFlight reports whether audio is queued to play or not yet fully heard. Held audio
// is not: nothing happens to it until its commit or revoke arrives.
func (p *player) inFlight() bool {
	return p.playable() || len(p.pending) > 0 || (p.run != nil && p.run.rs != nil) || p.heard < p.w
}

// playable reports whether the queue's head may be played.
func (p *player) playable() bool { return len(p.queue) > 0 && !p.queue[0].held }

// busy reports whether the writer must keep waking up: audio in flight, a tail, a request.
func (p *player) busy() bool {
	return p.inFlight() || !p.tailUntil.IsZero() || p.inflight != nil || p.state == Playing
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
