package speaker

import (
	"math"
	"time"
)

// sync brings the writer up to date with the renderer at time now: records, acknowledgements, the heard
// position and the state, queueing progress reports for what changed. steady asks for
// a steady Playing report as well.
func (p *player) sync(now time.Time, steady bool) {
	for {
		p.drainRecords()
		if p.inflight == nil || p.ring.ack.Load() < p.inflight.seq {
			break
		}
		r := *p.inflight
		p.inflight = nil
		p.resolve(r, now)
		if len(p.waiting) > 0 {
			next := p.waiting[0]
			p.waiting = p.waiting[1:]
			p.submit(next)
		}
	}
	heardFrame := p.out.HeardFrame(now)
	h := p.heardAt(heardFrame)
	if h > p.heard {
		p.heard = h
	}
	p.pruneGains(heardFrame)
	switch p.state {
	case Paused, Stopped:
		if !p.tailUntil.IsZero() && !now.Before(p.tailUntil) {
			// Everything up to the stop has been heard now, whatever a slightly late
			// device clock estimate says: the report must match the first one exactly.
			p.tailUntil = time.Time{}
			p.heard = max(p.heard, p.idleMark)
			p.emit(p.reportAt(p.state, p.heard, p.pos(now), false, "tail ended"))
		}
		if p.state == Stopped && p.tailUntil.IsZero() && p.heard > p.idleMark {
			p.state = Playing
			p.emit(p.reportAt(Playing, p.heard, p.pos(now), false, "playing"))
		}
	case Idle:
		if p.heard > p.idleMark {
			p.state = Playing
			p.emit(p.reportAt(Playing, p.heard, p.pos(now), false, "playing"))
		}
	case Playing:
		if !p.inFlight() {
			p.state = Idle
			p.idleMark = p.heard
			p.emit(p.reportAt(Idle, p.heard, p.pos(now), false, "finished"))
		} else if steady {
			p.emit(p.reportAt(Playing, p.heard, p.pos(now), false, ""))
		}
	}
	p.prune()
}

// resolve acts on the renderer's acknowledgement of r.
func (p *player) resolve(r request, now time.Time) {
	ackPos := p.ring.ackPos.Load()
	switch r.kind {
	case reqPause:
		p.stopReport(Paused, ackPos, now, r.reason)
	case reqResume:
		p.tailUntil = time.Time{}
		if p.state == Paused {
			next := Idle
			if p.inFlight() {
				next = Playing
			}
			p.state = next
			p.idleMark = p.heard
			p.emit(p.reportAt(next, p.heard, p.pos(now), false, r.reason))
		}
	case reqInterrupt:
		stop := max(r.at, ackPos)
		if r.at == noLimit {
			stop = ackPos
		} else {
			p.cutAt(stop, func(it *item) bool { return p.droppable(it, r.turn) })
			p.lift()
		}
		p.dropQueued(func(it *item) bool { return p.droppable(it, r.turn) })
		if r.at == noLimit {
			// What plays belongs to a later turn: nothing of the interrupted one is left
			// to stop. Say so, in the state the speaker is in.
			p.emit(p.reportAt(p.state, p.heard, p.pos(now), false, r.reason+": nothing of it playing"))
			return
		}
		p.stopReport(Stopped, stop, now, r.reason)
	case reqRevoke:
		if ackPos <= r.at {
			p.cutAt(r.at, func(it *item) bool { return it == r.revoked })
		}
		p.lift()
	}
}

// stopReport switches to state (Paused or Stopped) after the renderer stopped reading at ring
// position stop, and reports the last sample the listener will hear and when.
func (p *player) stopReport(state State, stop int64, now time.Time, reason string) {
	p.state = state
	p.idleMark = stop
	end := p.out.FrameTime(p.stopFrame(stop))
	tail := end.After(now)
	if tail {
		p.tailUntil = end
	} else {
		p.tailUntil = time.Time{}
		end = now
		if stop > p.heard {
			p.heard = stop
		}
	}
	p.emit(p.reportAt(state, stop, end.Sub(p.start), tail, reason))
}

// stopFrame returns the device frame at which the output went silent at ring position
// stop (so the listener hears the sample before it just before that frame).
func (p *player) stopFrame(stop int64) int64 {
	for i := len(p.segs) - 1; i >= 0; i-- {
		if s := p.segs[i]; !s.playing && s.pos <= stop {
			return s.frame
		}
	}
	return p.ring.rendered.Load()
}

// heardAt maps the device frame the listener hears to a ring position (ring positions
// below the result have been heard).
func (p *player) heardAt(frame int64) int64 {
	i := -1
	for j, s := range p.segs {
		if s.frame > frame {
			break
		}
		i = j
	}
	if i < 0 {
		return p.heard
	}
	s := p.segs[i]
	h := s.pos
	if s.playing {
		h += frame - s.frame
		if i+1 < len(p.segs) {
			h = min(h, p.segs[i+1].pos)
		}
		h = min(h, p.ring.r.Load())
	}
	// Keep the segment in force; older ones are no longer needed.
	p.segs = p.segs[i:]
	return max(h, p.heard)
}

// prune forgets placements heard completely, keeping the last one for reports.
func (p *player) prune() {
	i := 0
	for i+1 < len(p.placed) && p.placed[i].end <= p.heard && p.placed[i+1].start < p.heard {
		i++
	}
	if i > 0 {
		p.placed = append(p.placed[:0], p.placed[i:]...)
	}
}

// reportAt builds a progress report for the heard position h.
func (p *player) reportAt(state State, h int64, pos time.Duration, tail bool, reason string) Progress {
	pr := Progress{State: state, Pos: pos, Tail: tail, Reason: reason}
	if g := p.gainAt(max(p.out.HeardFrame(p.start.Add(pos))-1, 0)); g != 1 { // the frame heard last
		pr.Gain = 20 * math.Log10(max(float64(g), 1e-6))
	}
	var at *placement
	for _, pl := range p.placed {
		if pl.start < h {
			at = pl
		}
	}
	if at != nil {
		pr.Heard, pr.Item, pr.Offset, pr.Length = at.it.id, at.it.payload, at.offset(h), at.it.length
		if sp, ok := at.it.payload.(Speech); ok {
			t := sp.HeardAt(pr.Offset)
			pr.Text = &t
		}
	}
	return pr
}

func (p *player) pos(now time.Time) time.Duration { return now.Sub(p.start) }

func (p *player) emit(pr Progress) { p.reports = append(p.reports, pr) }

// takeReports returns and clears the queued reports.
func (p *player) takeReports() []Progress {
	r := p.reports
	p.reports = nil
	return r
}
