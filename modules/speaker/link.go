package speaker

import (
	"math"
	"sync/atomic"
)

// link connects the module's goroutine (the producer, "P") with the output's consumer
// ("C"): the PortAudio callback thread of a Device, or the File output's rendering, which
// runs on the module goroutine itself. C must never wait for P, so they share nothing
// but this lock-free single-producer/single-consumer structure:
//
//   - ring holds mono samples at the output rate. P writes positions [r, w) and then
//     publishes w; C reads from r and publishes r. Positions are absolute sample counts;
//     the slot of position x is x & mask. P never writes a slot C may still read
//     (x < r+len(ring)), and C never reads past w.
//   - Control: P sets paused and limit (C never reads at or past limit), then bumps req.
//     C picks up both at the start of its next render, and acknowledges by publishing
//     ackPos (its read position when it applied them) and then ack = req. Everything P
//     learns about where the output stopped comes from these acknowledgements.
//   - records: C appends a record at every transition between ring audio and silence
//     (and when its read position jumps), so that P can map the device frame the listener
//     hears to a ring position. P drains them.
//   - rendered and anchor describe the device's clock (see output).
//
// Ownership: ring slots belong to P until published by w and to C until released by r;
// every other field is written by exactly one side, as marked.
type link struct {
	ring []float32
	mask int64

	w     atomic.Int64  // P: end of written audio
	limit atomic.Int64  // P: C reads only below it (noLimit when free)
	pause atomic.Bool   // P: C outputs silence and does not read
	req   atomic.Uint64 // P: bumped after changing limit or pause

	r      atomic.Int64  // C: read position
	ackPos atomic.Int64  // C: r when the request ack was applied
	ack    atomic.Uint64 // C: the last request applied

	rec      [recordSlots]record // slots: C writes, P reads after recW publishes them
	recW     atomic.Uint64       // C: records written
	recR     atomic.Uint64       // P: records consumed
	recLost  atomic.Uint64       // C: records dropped because P fell behind
	rendered atomic.Int64        // C: device frames rendered (ring audio and silence)

	// notify, when set before the output starts, is called by C after it applied a
	// request, to wake P (it must not block: the Device uses Ports.TryPost).
	notify func()
}

const (
	recordSlots = 1024
	noLimit     = math.MaxInt64
)

// record says that from device frame frame on, the output is ring audio starting at
// position pos (playing) or silence with the read position at pos (not playing).
type record struct {
	frame   int64
	pos     int64
	playing bool
}

func newLink(capacity int) *link {
	n := 1
	for n < capacity {
		n <<= 1
	}
	l := &link{ring: make([]float32, n), mask: int64(n - 1)}
	l.limit.Store(noLimit)
	return l
}

// renderer is C's side of the link. One goroutine or thread owns it at a time.
type renderer struct {
	l       *link
	frame   int64 // device frames rendered
	r       int64 // read position (published in l.r)
	seen    uint64
	paused  bool
	limit   int64
	playing bool
}

func newRenderer(l *link) *renderer { return &renderer{l: l, limit: noLimit} }

// render fills out with frames sample frames of channels interleaved channels: ring
// audio (the same sample on every channel) while there is some and the output is not
// paused, silence otherwise. It never blocks and never allocates.
func (c *renderer) render(out []float32, frames, channels int) {
	l := c.l
	applied := false
	var ackPos int64
	if req := l.req.Load(); req != c.seen {
		c.seen = req
		c.paused = l.pause.Load()
		c.limit = l.limit.Load()
		applied, ackPos = true, c.r
		if c.playing && (c.paused || c.r >= c.limit) {
			// The output goes silent here, even if this render asks for no frames.
			c.record(record{frame: c.frame, pos: c.r, playing: false})
			c.playing = false
		}
	}
	n := 0
	if !c.paused {
		if avail := min(l.w.Load(), c.limit) - c.r; avail > 0 {
			n = int(min(int64(frames), avail))
		}
	}
	if n > 0 && !c.playing {
		c.record(record{frame: c.frame, pos: c.r, playing: true})
		c.playing = true
	}
	for i := 0; i < n; i++ {
		v := l.ring[(c.r+int64(i))&l.mask]
		for ch := 0; ch < channels; ch++ {
			out[i*channels+ch] = v
		}
	}
	c.r += int64(n)
	l.r.Store(c.r)
	if n < frames {
		if c.playing {
			c.record(record{frame: c.frame + int64(n), pos: c.r, playing: false})
			c.playing = false
		}
		clear(out[n*channels : frames*channels])
	}
	c.frame += int64(frames)
	l.rendered.Store(c.frame)
	if applied {
		// Acknowledged last, so that P finds the records of this render (where the
		// output went silent) when it sees the acknowledgement.
		l.ackPos.Store(ackPos)
		l.ack.Store(c.seen)
		if l.notify != nil {
			l.notify()
		}
	}
}

func (c *renderer) record(rec record) {
	l := c.l
	w := l.recW.Load()
	if w-l.recR.Load() >= recordSlots {
		l.recLost.Add(1)
		return
	}
	l.rec[w%recordSlots] = rec
	l.recW.Store(w + 1)
}
