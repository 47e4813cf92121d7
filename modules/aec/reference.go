package aec

import (
	"math"
	"time"

	"github.com/parley-voice/parley/audio"
	"go.uber.org/zap"
)

// position returns the microphone position captured at t.
func (r *runner) position(t time.Time) int64 {
	d := t.Sub(r.epoch)
	n := int64(d) * Rate / int64(time.Second)
	if n*int64(time.Second) > int64(d)*Rate {
		n-- // round down for times before the epoch too
	}
	return n
}

// played puts played audio into the reference.
func (r *runner) played(f audio.Frame, heard time.Time) {
	if f.Rate != Rate || f.Channels != 1 || f.Len() == 0 {
		return
	}
	if !r.anchored {
		r.stash = append(r.stash, f)
		r.stashT = append(r.stashT, heard)
		var n int64
		for _, s := range r.stash {
			n += int64(s.Len())
		}
		if n > audio.DurationToSamples(maxStash, Rate) {
			r.stash, r.stashT = r.stash[1:], r.stashT[1:]
		}
		return
	}
	r.place(heard, f.Start, silent(f.Samples) && silent(r.ref))
	pos, samples := r.offset+f.Start, f.Samples
	if pos < r.rendered {
		cut := r.rendered - pos
		if cut >= int64(len(samples)) {
			r.late += int64(len(samples))
			return
		}
		r.late += cut
		pos, samples = r.rendered, samples[cut:]
	}
	end := r.rendered + int64(len(r.ref))
	if pos < end {
		r.ref = r.ref[:pos-r.rendered] // moved back: the newer audio wins
	} else if pos > end {
		r.ref = append(r.ref, make([]float32, pos-end)...)
	}
	r.ref = append(r.ref, samples...)
}

// place updates the played stream's offset with what one played IU's timing says: its
// first sample, at played position start, is heard at heard (quiet: the IU and the
// reference not yet rendered are silence). While everything played so far was silence
// the stream follows the timing, since there is nothing to misplace; the first sound
// fixes it, early by earlyBy, so that a timing a little off never puts the reference
// after its echo. Afterwards it moves by what the two clocks it comes from say
// together: the output's (when played sample 0 is heard) and the microphone's epoch
// (when its sample 0 was captured). Only their difference moves the echo in the
// microphone's samples: a laptop's output and input share one crystal, and when it runs
// fast both clocks move earlier alike while the echo stays where it was.
//   - The microphone's epoch is an estimate from stamps that are never early but often
//     late. When it moves earlier faster than any clock drifts (maxDrift), it settles:
//     the microphone's sliding minimum found earlier stamps (after a loaded start, or a
//     backlog of captured audio that PortAudio's capture time does not include). The
//     echo stays where it was in the microphone's samples then, so those moves are
//     dropped. Any other move of the epoch (samples lost uncounted, a slip; a clock
//     drifting, 1 ms in 10 s at 100 ppm) that the output's timing does not share is
//     followed at once past epochMoveMin, and then by moveMin steps until the clock's
//     average has caught up;
//     unless the engine's own delay estimate shows it can absorb the move
//     (engineKeepsUp).
//   - The output's moves come with its timing's jitter: when moveAgree IUs in a row say
//     it plays moveMin or more later or earlier than the microphone's clock explains (a
//     sound server that grows its buffer after an underrun plays everything later, and
//     the echo moves with it), the reference follows, so that the engine sees its delay
//     unchanged; smaller differences are the engine's to absorb, and so are moves
//     under epochMoveMin that its delay estimate shows it can absorb (engineKeepsUp).
//
// Every move makes the engine adapt anew, and a residue of echo while it does can sound
// like the user.
func (r *runner) place(heard time.Time, start int64, quiet bool) {
	out := heard.Add(-audio.SamplesToDuration(start, Rate))
	if !r.locked {
		r.offset, r.locked, r.agreed = r.position(heard)-start-audio.DurationToSamples(earlyBy, Rate), !quiet, 0
		r.placedOut, r.placedEpoch = out, r.epoch
		r.seenEpoch, r.seenAt = r.epoch, r.next
		return
	}
	follow := epochMoveMin
	if r.tracking > 0 {
		follow = moveMin
	}
	// Settling: the estimate moved earlier than it was when the stream was placed, and
	// faster than a clock drifts; the echo has not moved. (Only below where it was
	// placed: an estimate that jitters must not ratchet later by its dips.)
	moved, over := r.seenEpoch.Sub(r.epoch), audio.SamplesToDuration(r.next-r.seenAt, Rate)
	fast := math.Abs(float64(moved)) > maxDrift*float64(over)
	if r.epoch.Before(r.placedEpoch) && moved > 0 && fast {
		r.placedEpoch = r.epoch
	}
	r.seenEpoch, r.seenAt = r.epoch, r.next
	byEpoch := r.epoch.Sub(r.placedEpoch)
	// Where the two clocks together put the stream.
	to := r.offset + audio.DurationToSamples(out.Sub(r.placedOut)-byEpoch, Rate)
	move := func(why string) {
		// Rare, and the engine adapts anew after it: worth seeing in any log.
		r.log.Info("played audio moved", zap.String("with", why), zap.Duration("by", audio.SamplesToDuration(to-r.offset, Rate)))
		r.offset, r.agreed = to, 0
		r.placedOut, r.placedEpoch = out, r.epoch
		r.moves++
	}
	// leave notes a move left to the engine, whose delay estimate absorbs it.
	leave := func(why string, engineDelay time.Duration) {
		r.log.Info("played audio left in place for the engine", zap.String("with", why),
			zap.Duration("by", audio.SamplesToDuration(to-r.offset, Rate)), zap.Duration("engine_delay", engineDelay))
		r.left++
	}
	jump := audio.DurationToSamples(follow, Rate)
	if abs(audio.DurationToSamples(byEpoch, Rate)) >= jump && abs(to-r.offset) >= jump {
		if r.tracking == 0 {
			r.leaving, r.leftBy = false, 0 // a new move of the clock: the engine may take it
		}
		if r.tracking == 0 || r.leaving {
			if d, ok := r.engineKeepsUp(r.leftBy + to - r.offset); ok {
				if !r.leaving {
					leave("the microphone's clock", d)
				}
				r.leaving, r.leftBy = true, r.leftBy+to-r.offset
				r.placedEpoch, r.agreed = r.epoch, 0
				r.tracking = averaging
				return
			}
		}
		r.leaving = false
		move("the microphone's clock")
		r.tracking = averaging
		return
	}
	// While the microphone's clock moves fast (a slip the average takes in over
	// averaging frames), the move is its rule's to make, in one piece.
	step := audio.DurationToSamples(moveMin, Rate)
	switch {
	case fast || abs(to-r.offset) < step:
		r.agreed = 0
	case r.agreed > 0 && abs(to-r.moveTo) <= step/2:
		r.agreed++
	default:
		r.moveTo, r.agreed = to, 1
	}
	if r.agreed >= moveAgree {
		if abs(to-r.offset) < audio.DurationToSamples(epochMoveMin, Rate) {
			if d, ok := r.engineKeepsUp(to - r.offset); ok {
				leave("the output's latency", d)
				r.agreed = 0
				r.placedOut, r.placedEpoch = out, r.epoch
				return
			}
		}
		move("the output's latency")
	}
}

// engineKeepsUp reports whether the engine is better left to absorb a move of the played
// stream by samples (all of the move so far; negative: earlier) than made to find the
// echo again after it: its own delay estimate, by as much longer or shorter, still has
// the echo at least earlyBy and at most maxKept after the reference. It returns that
// estimate too, for the log. Every move makes an
// engine adapt anew, and a residue of the agent's voice while it does can sound like
// the user (and become a user turn). Two kinds of move are as likely the
// clocks' estimates as the echo moving:
//   - The microphone's clock is a sliding minimum of its stamps (10 s in package mic): a
//     later move shows only once the earlier stamps leave its window, long after the
//     echo moved, if it did (samples lost); by then an engine with a delay estimator
//     has found the echo where it went. If the stamps were early instead, the echo
//     never moved at all.
//   - A small move of the output's timing (under epochMoveMin) comes of its jitter (a
//     starved speaker) as often as of the output's buffer; a buffer that grows moves it
//     by more.
func (r *runner) engineKeepsUp(by int64) (engineDelay time.Duration, ok bool) {
	d := r.m.c.Stats().Delay
	after := d.D + audio.SamplesToDuration(by, Rate)
	return d.D, d.OK && d.D > 0 && after >= earlyBy && after <= maxKept
}

func silent(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}
