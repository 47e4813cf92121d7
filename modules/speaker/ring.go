package speaker

import (
	"math"
	"sync/atomic"
)

// Ring connects the speaker module's goroutine, the writer (it resamples the queued
// audio into the ring and asks for control changes), with the output's renderer, which
// plays from it: the PortAudio callback thread of a device output, or the file output's
// rendering, which runs on the module goroutine itself. The renderer must never wait for
// the writer, so they share nothing but this lock-free single-writer/single-renderer
// structure:
//
//   - ring holds mono samples at the output rate. The writer writes positions [r, w) and
//     then publishes w; the renderer reads from r and publishes r. Positions are
//     absolute sample counts; the slot of position x is x & mask. The writer never
//     writes a slot the renderer may still read (x < r+len(ring)), and the renderer never
//     reads past w.
//   - Control: the writer sets paused and limit (the renderer never reads at or past
//     limit), then bumps req. The renderer picks up both at the start of its next
//     render, and acknowledges by publishing ackPos (its read position when it applied
//     them) and then ack = req. Everything the writer learns about where the output
//     stopped comes from these acknowledgements.
//   - records: the renderer appends a record at every transition between ring audio
//     and silence (and when its read position jumps), so that the writer can map the
//     device frame the listener hears to a ring position. The writer drains them.
//   - Gain: the writer sets gain, the level it wants (ducking lowers it while the user
//     may be barging in); the renderer ramps to it linearly over rampFrames frames from
//     the level it had reached, and appends a gainChange record at the device frame
//     where each ramp starts, so that the writer knows exactly what level the listener
//     hears when. A change of level moves no position: it never touches r, limit or the
//     records.
//   - rendered describes the device's clock (see Output).
//   - tap, when the speaker reports what it plays (Options.Played), receives every
//     sample the renderer outputs, ring audio and silence alike, one per device frame.
//     The renderer writes tap positions [tapR, tapR+len(tap)) and publishes tapW; the
//     writer copies [tapR, tapW) out and publishes tapR. Tap position i is device frame
//     i until the tap first runs full (the writer stalled for longer than it holds):
//     the renderer then drops frames until there is room again, and before it writes
//     the next one it appends a mark (its frame and tap position) to marks, so that
//     the writer knows which frame each position holds and how many were lost.
//
// Ownership: ring slots belong to the writer until published by w and to the renderer
// until released by r; every other field is written by exactly one side, as marked.
// An Output only ever touches a Ring through a Renderer (and SetNotify).
type Ring struct {
	ring []float32
	mask int64

	w     atomic.Int64  // writer: end of written audio
	limit atomic.Int64  // writer: the renderer reads only below it (noLimit when free)
	pause atomic.Bool   // writer: the renderer outputs silence and does not read
	req   atomic.Uint64 // writer: bumped after changing limit or pause

	r      atomic.Int64  // renderer: read position
	ackPos atomic.Int64  // renderer: r when the request ack was applied
	ack    atomic.Uint64 // renderer: the last request applied

	rec      [recordSlots]record // slots: the renderer writes, the writer reads after recW publishes them
	recW     atomic.Uint64       // renderer: records written
	recR     atomic.Uint64       // writer: records consumed
	recLost  atomic.Uint64       // renderer: records dropped because the writer fell behind
	rendered atomic.Int64        // renderer: device frames rendered (ring audio and silence)

	tap     []float32 // slots: the renderer writes, the writer reads after tapW publishes them
	tapMask int64
	tapW    atomic.Int64       // renderer: tap positions written
	tapR    atomic.Int64       // writer: tap positions consumed
	marks   [markSlots]tapMark // slots: the renderer writes, the writer reads after markW publishes them
	markW   atomic.Uint64      // renderer: marks written
	markR   atomic.Uint64      // writer: marks consumed

	gain       atomic.Uint32         // writer: the level wanted (float32 bits, 1 = full)
	gainRec    [gainSlots]gainChange // slots: the renderer writes, the writer reads after gainW publishes them
	gainW      atomic.Uint64         // renderer: gain changes written
	gainR      atomic.Uint64         // writer: gain changes consumed
	gainLost   atomic.Uint64         // renderer: gain changes dropped because the writer fell behind
	rampFrames int64                 // frames a change of level takes (set before rendering starts)

	// notify, when set before the output starts, is called by the renderer after it
	// applied a request, to wake the writer.
	notify func()
}

// tapMark says that tap position pos holds device frame frame (frames were lost before
// it).
type tapMark struct{ pos, frame int64 }

const (
	markSlots   = 16
	recordSlots = 1024
	gainSlots   = 64
	noLimit     = math.MaxInt64
)

// record says that from device frame frame on, the output is ring audio starting at
// position pos (playing) or silence with the read position at pos (not playing).
type record struct {
	frame   int64
	pos     int64
	playing bool
}

// gainChange says that from device frame frame on, the level ramps linearly from from to
// to over frames frames: the sample at frame+i is scaled by rampGain(from, to, i, frames).
type gainChange struct {
	frame    int64
	from, to float32
	frames   int64
}

// at returns the level of device frame f (f >= c.frame).
func (c gainChange) at(f int64) float32 { return rampGain(c.from, c.to, f-c.frame, c.frames) }

// rampGain is the level of the i-th frame of a ramp of n frames from from to to: it
// reaches to on the ramp's last frame.
func rampGain(from, to float32, i, n int64) float32 {
	if i+1 >= n {
		return to
	}
	return from + (to-from)*float32(i+1)/float32(n)
}

func newRing(capacity int) *Ring {
	n := pow2(capacity)
	r := &Ring{ring: make([]float32, n), mask: int64(n - 1), rampFrames: 1}
	r.limit.Store(noLimit)
	r.gain.Store(math.Float32bits(1))
	return r
}

// withTap gives the ring a tap of at least capacity frames.
func (r *Ring) withTap(capacity int) *Ring {
	n := pow2(capacity)
	r.tap, r.tapMask = make([]float32, n), int64(n-1)
	return r
}

func pow2(capacity int) int {
	n := 1
	for n < capacity {
		n <<= 1
	}
	return n
}

// setRamp makes changes of level take d at rate (at least one frame). Call it before
// the output starts rendering.
func (r *Ring) setRamp(frames int64) { r.rampFrames = max(frames, 1) }

// SetNotify makes the renderer call f after it applied a control request, so that an
// output whose renderer runs on its own thread wakes the module at once (f must not
// block: a device output uses Ports.TryPost). Call it before the output starts
// rendering.
func (r *Ring) SetNotify(f func()) { r.notify = f }

// Renderer is the output's side of a Ring. One goroutine or thread owns it at a time.
type Renderer struct {
	ring    *Ring
	frame   int64 // device frames rendered
	r       int64 // read position (published in ring.r)
	seen    uint64
	paused  bool
	limit   int64
	playing bool
	tapW    int64 // tap positions written (published in ring.tapW)
	tapGap  bool  // frames were dropped since the last one written to the tap
	// ramp is the level change in force (the latest; a finished ramp holds its level).
	ramp gainChange
}

// NewRenderer returns the renderer of r; an output makes one in Begin.
func NewRenderer(r *Ring) *Renderer {
	return &Renderer{ring: r, limit: noLimit, ramp: gainChange{from: 1, to: 1, frames: 1}}
}

// Frame returns how many device frames have been rendered.
func (rd *Renderer) Frame() int64 { return rd.frame }

// Render fills out with frames sample frames of channels interleaved channels: ring
// audio (the same sample on every channel, scaled by the level) while there is some and
// the output is not paused, silence otherwise. It never blocks and never allocates.
func (rd *Renderer) Render(out []float32, frames, channels int) {
	l := rd.ring
	if g := math.Float32frombits(l.gain.Load()); g != rd.ramp.to {
		// A new level: ramp to it from wherever the current ramp has got to.
		rd.ramp = gainChange{frame: rd.frame, from: rd.ramp.at(rd.frame - 1), to: g, frames: l.rampFrames}
		rd.recordGain(rd.ramp)
	}
	applied := false
	var ackPos int64
	if req := l.req.Load(); req != rd.seen {
		rd.seen = req
		rd.paused = l.pause.Load()
		rd.limit = l.limit.Load()
		applied, ackPos = true, rd.r
		if rd.playing && (rd.paused || rd.r >= rd.limit) {
			// The output goes silent here, even if this render asks for no frames.
			rd.record(record{frame: rd.frame, pos: rd.r, playing: false})
			rd.playing = false
		}
	}
	n := 0
	if !rd.paused {
		if avail := min(l.w.Load(), rd.limit) - rd.r; avail > 0 {
			n = int(min(int64(frames), avail))
		}
	}
	if n > 0 && !rd.playing {
		rd.record(record{frame: rd.frame, pos: rd.r, playing: true})
		rd.playing = true
	}
	steady := rd.frame-rd.ramp.frame+1 >= rd.ramp.frames // no ramp under way in this render
	for i := 0; i < n; i++ {
		v := l.ring[(rd.r+int64(i))&l.mask]
		switch {
		case steady && rd.ramp.to == 1:
		case steady:
			v *= rd.ramp.to
		default:
			v *= rd.ramp.at(rd.frame + int64(i))
		}
		for ch := 0; ch < channels; ch++ {
			out[i*channels+ch] = v
		}
	}
	if l.tap != nil {
		rd.tap(out, n, frames, channels)
	}
	rd.r += int64(n)
	l.r.Store(rd.r)
	if n < frames {
		if rd.playing {
			rd.record(record{frame: rd.frame + int64(n), pos: rd.r, playing: false})
			rd.playing = false
		}
		clear(out[n*channels : frames*channels])
	}
	rd.frame += int64(frames)
	l.rendered.Store(rd.frame)
	if applied {
		// Acknowledged last, so that the writer finds the records of this render (where
		// the output went silent) when it sees the acknowledgement.
		l.ackPos.Store(ackPos)
		l.ack.Store(rd.seen)
		if l.notify != nil {
			l.notify()
		}
	}
}

// tap copies this render's frames into the tap: the n frames of ring audio as rendered
// (after the level), then silence up to frames, as far as the writer has made room; the rest are
// dropped (see Ring).
func (rd *Renderer) tap(out []float32, n, frames, channels int) {
	l := rd.ring
	room := l.tapR.Load() + int64(len(l.tap)) - rd.tapW
	k := int(min(int64(frames), max(room, 0)))
	if k > 0 && rd.tapGap {
		if w := l.markW.Load(); w-l.markR.Load() < markSlots {
			l.marks[w%markSlots] = tapMark{pos: rd.tapW, frame: rd.frame}
			l.markW.Store(w + 1)
			rd.tapGap = false
		} else {
			k = 0 // no room to say where the audio resumes: keep dropping
		}
	}
	for i := 0; i < k; i++ {
		var v float32
		if i < n {
			v = out[i*channels]
		}
		l.tap[(rd.tapW+int64(i))&l.tapMask] = v
	}
	rd.tapW += int64(k)
	if k < frames {
		rd.tapGap = true
	}
	l.tapW.Store(rd.tapW)
}

func (rd *Renderer) recordGain(c gainChange) {
	l := rd.ring
	w := l.gainW.Load()
	if w-l.gainR.Load() >= gainSlots {
		l.gainLost.Add(1)
		return
	}
	l.gainRec[w%gainSlots] = c
	l.gainW.Store(w + 1)
}

func (rd *Renderer) record(rec record) {
	l := rd.ring
	w := l.recW.Load()
	if w-l.recR.Load() >= recordSlots {
		l.recLost.Add(1)
		return
	}
	l.rec[w%recordSlots] = rec
	l.recW.Store(w + 1)
}
