package speaker

import (
	"github.com/parley-voice/parley/audio"
	"go.uber.org/zap"
)

// fill moves queued audio through the resampler into the ring, up to lead ahead of the
// renderer.
func (p *player) fill() {
	if p.inflight != nil && (p.inflight.kind == reqInterrupt || p.inflight.kind == reqRevoke) {
		return // the ring's future is being rewritten
	}
	p.writePending()
	target := p.ring.r.Load() + p.lead
	for len(p.pending) == 0 && p.w < target && p.playable() {
		it := p.queue[0]
		if p.run == nil || p.run.rate != it.pcm.Rate {
			p.endRun()
			if len(p.pending) > 0 {
				break
			}
			if err := p.startRun(it.pcm.Rate); err != nil {
				p.log.Error("cannot resample audio; dropping it", zap.String("iu", string(it.id)), zap.Error(err))
				p.queue = p.queue[1:]
				continue
			}
		}
		rn := p.run
		n := int64(it.pcm.Len())
		if it.fed == 0 {
			k := rn.in
			p.placed = append(p.placed, &placement{
				it: it, r0: rn.r0, k: k, up: rn.up, down: rn.down,
				start: rn.r0 + ceilDiv(k*rn.up, rn.down),
				end:   rn.r0 + ceilDiv((k+n)*rn.up, rn.down),
			})
		}
		want := (target-p.w)*rn.down/rn.up + 1
		chunk := min(n-it.fed, want)
		in := it.pcm.Samples[it.fed : it.fed+chunk]
		if rn.rs != nil {
			p.pending = rn.rs.Process(in)
		} else {
			p.pending = append(p.pending[:0], in...)
		}
		it.fed += chunk
		rn.in += chunk
		if it.fed == n {
			p.queue = p.queue[1:]
		}
		p.writePending()
	}
	if !p.playable() && len(p.pending) == 0 && p.run != nil && p.run.rs != nil && p.w-p.ring.r.Load() < p.lowWater {
		// Nothing more to resample for now and the ring runs low: release what the
		// filter holds back. Audio arriving later starts a new run.
		p.endRun()
	}
}

func (p *player) startRun(rate int) error {
	g := gcd(rate, p.rate)
	rn := &resampling{rate: rate, r0: p.w, up: int64(p.rate / g), down: int64(rate / g)}
	if rate != p.rate {
		rs, err := audio.NewResampler(rate, p.rate, 1, p.quality)
		if err != nil {
			return err
		}
		rn.rs = rs
	}
	p.run = rn
	return nil
}

// endRun flushes the current run's resampler into pending and forgets the run.
func (p *player) endRun() {
	if p.run == nil {
		return
	}
	if p.run.rs != nil {
		p.pending = append(p.pending, p.run.rs.Flush()...)
		p.writePending()
	}
	p.run = nil
}

// writePending copies pending output into the ring as far as there is room.
func (p *player) writePending() {
	if len(p.pending) == 0 {
		return
	}
	free := int64(len(p.ring.ring)) - (p.w - p.ring.r.Load())
	n := min(int64(len(p.pending)), free)
	for i := int64(0); i < n; i++ {
		p.ring.ring[(p.w+i)&p.ring.mask] = p.pending[i]
	}
	p.w += n
	p.ring.w.Store(p.w)
	p.pending = p.pending[n:]
}

// drainRecords moves the renderer's records into segs.
func (p *player) drainRecords() {
	l := p.ring
	w := l.recW.Load()
	for r := l.recR.Load(); r < w; r++ {
		rec := l.rec[r%recordSlots]
		if !rec.playing && len(p.queue)+len(p.pending) > 0 && !p.paused && p.inflight == nil && rec.pos == p.w {
			// The renderer ran dry while audio was waiting: the module was late.
			p.underruns++
			p.log.Debug("speaker underrun", zap.Int64("frame", rec.frame), zap.Int("underruns", p.underruns))
		}
		p.segs = append(p.segs, rec)
		l.recR.Store(r + 1)
	}
	if lost := l.recLost.Load(); lost != p.lostRecords {
		p.log.Warn("speaker fell behind its output's records; heard positions may be off", zap.Uint64("lost", lost-p.lostRecords))
		p.lostRecords = lost
	}
	gw := l.gainW.Load()
	for r := l.gainR.Load(); r < gw; r++ {
		p.gains = append(p.gains, l.gainRec[r%gainSlots])
		l.gainR.Store(r + 1)
	}
	if lost := l.gainLost.Load(); lost != p.lostGains {
		p.log.Warn("speaker fell behind its output's changes of level; reported levels may be off", zap.Uint64("lost", lost-p.lostGains))
		p.lostGains = lost
	}
}

// gainAt returns the level of device frame f.
func (p *player) gainAt(f int64) float32 {
	if len(p.gains) == 0 {
		return 1
	}
	i := 0
	for i+1 < len(p.gains) && p.gains[i+1].frame <= f {
		i++
	}
	if c := p.gains[i]; c.frame <= f {
		return c.at(f)
	}
	return p.gains[0].from // before the first change kept: the level it started from
}

// pruneGains forgets the changes of level before the one in force at the heard frame:
// no report asks about an earlier frame.
func (p *player) pruneGains(heard int64) {
	i := 0
	for i+1 < len(p.gains) && p.gains[i+1].frame <= heard {
		i++
	}
	if i > 0 {
		p.gains = append(p.gains[:0], p.gains[i:]...)
	}
}
