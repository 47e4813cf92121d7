package asr

import (
	"context"
	"fmt"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/vad"
	"go.uber.org/zap"
)

// The incoming IUs: audio, the VAD's segments and pauses, the end of turn and the
// end of the input, and what each changes of the utterances' state.

// update applies one incoming update.
func (r *runner) update(ctx context.Context, up iu.Update) error {
	switch pl := up.IU.Payload.(type) {
	case linearAudio:
		if up.Type == iu.Add && r.m.cfg.DecodeLinear {
			r.nextLinear = pl.LinearAudio()
		}
	case audio.Frame:
		if up.Type == iu.Add {
			if r.nextLinear.SameStretch(pl) {
				pl.Samples = r.nextLinear.Samples
			}
			r.nextLinear = audio.Frame{}
			return r.frame(up.IU.ID, pl)
		}
	case vad.Segment:
		switch up.Type {
		case iu.Add:
			r.segmentStart(up.IU.ID, pl)
		case iu.Commit:
			r.segmentEnd(up.IU.ID, pl)
		}
	case vad.Pause:
		if r.m.cfg.SpeculateAtPause && len(up.IU.GroundedIn) > 0 {
			switch up.Type {
			case iu.Add, iu.UpdatePayload:
				r.segmentPause(up.IU.GroundedIn[0], pl)
			case iu.Revoke:
				r.segmentResume(up.IU.GroundedIn[0])
			}
		}
	case vad.EndOfTurn:
		if up.Type == iu.Add {
			r.endOfTurn(pl)
		}
	case vad.EndOfStream:
		// No audio or segment will come; the utterance in progress waits only for its
		// end of turn. (The recogniser and the end-of-turn policy read each other, so
		// neither would otherwise see its input end.)
		if up.Type == iu.Add {
			r.speechEnded = true
		}
	}
	return nil // frame commits carry nothing new for the ASR
}

// linearAudio is an echo canceller's linear output (aec.Linear).
type linearAudio interface {
	LinearAudio() audio.Frame
}

func (r *runner) frame(id iu.ID, f audio.Frame) error {
	if f.Rate != audio.PipelineRate || f.Channels != 1 {
		return fmt.Errorf("asr: audio %s: want %d Hz mono", f.Summary(), audio.PipelineRate)
	}
	a := audioRef{id: id, start: f.Start, samples: f.Samples}
	r.recent = append(r.recent, a)
	for len(r.recent) > 1 && r.recent[0].end() <= a.end()-r.history {
		r.recent[0] = audioRef{}
		r.recent = r.recent[1:]
	}
	for _, u := range r.queue {
		if !u.ended || u.recv < u.end {
			u.take(a)
		}
	}
	return nil
}

// segmentStart starts an utterance at a segment's onset, or continues the turn's
// utterance: then the user spoke again before the end of turn, and a speculative final
// decode of the audio so far is of no use any more.
func (r *runner) segmentStart(id iu.ID, seg vad.Segment) {
	if u := r.cur; u != nil {
		u.seg, u.paused, u.trim = id, false, 0
		r.dropFinal(u, "speech resumed")
		return
	}
	start := max(samplesOf(seg.Start)-r.preRoll, 0)
	if len(r.recent) > 0 {
		start = max(start, r.recent[0].start)
	}
	start = max(start, r.decodedTo)
	r.nextID++
	u := &utterance{
		id: r.nextID, start: start, recv: start, fed: start,
		agree:       NewLocalAgreement(r.m.cfg.Agreement),
		speechStart: -1, speechEnd: -1,
		seg: id, segEnd: -1, pauseEnd: -1, pauseSpeech: -1,
		overAgent: seg.Overlap,
	}
	for _, a := range r.recent {
		u.take(a)
	}
	r.cur = u
	r.queue = append(r.queue, u)
}

// segmentEnd notes where the turn's speech ended so far. A speculation started at the
// segment's pause stands if the segment ended where the pause said.
func (r *runner) segmentEnd(id iu.ID, seg vad.Segment) {
	if u := r.cur; u != nil && u.seg == id {
		u.seg, u.paused = "", false
		u.trim = samplesOf(seg.Trimmed)
		u.segEnd = samplesOf(seg.End) + u.trim
		if f := u.fin; f != nil && f.end != r.speculationEnd(u) {
			r.dropFinal(u, "the segment ended elsewhere than its pause")
		}
	}
}

// segmentPause: the open segment's speech paused; it will end at p.End unless it
// resumes. A tentative pause is too often followed by more speech for a final pass.
func (r *runner) segmentPause(seg iu.ID, p vad.Pause) {
	if u := r.cur; u != nil && u.seg == seg {
		u.paused, u.sure = true, !p.Tentative
		u.trim = samplesOf(p.Trimmed)
		u.segEnd = samplesOf(p.End) + u.trim
		u.pauseEnd, u.pauseSpeech = u.segEnd, u.segEnd
		if p.SpeechEnd > 0 { // 0: a VAD that does not say
			u.pauseSpeech = min(samplesOf(p.SpeechEnd)+u.trim, u.segEnd)
		}
		if u.fin == nil {
			u.overAgent = u.overAgent && p.Overlap
		}
	}
}

// segmentResume: the paused segment's speech went on; a speculation on its pause is void.
func (r *runner) segmentResume(seg iu.ID) {
	if u := r.cur; u != nil && u.seg == seg && u.paused {
		u.paused = false
		r.dropFinal(u, "speech resumed")
	}
}

// endOfTurn ends the turn's utterance; its final decode follows once its audio is in.
func (r *runner) endOfTurn(e vad.EndOfTurn) {
	u := r.cur
	if u == nil {
		return
	}
	r.cur = nil
	u.ended = true
	u.eotAt = r.p.Now()
	u.speechStart, u.speechEnd = samplesOf(e.SpeechStart), samplesOf(e.SpeechEnd)
	if r.decodesEnd() {
		// Trailing after the speech: what the partial decodes were fed does not matter
		// to FinalOf, and a peek covers the same end (and what was fed after it), so a
		// speculation started at the end of the turn's last segment decodes the same
		// audio as a final decode started now.
		r.setEnd(u, max(u.untrimmedEnd()+r.trailingOf(u), u.start))
	} else {
		// Final decodes everything fed, so the audio fed for partial hypotheses is not
		// taken back.
		u.end = max(u.untrimmedEnd()+r.trailing, u.fed, u.start)
		u.cut(u.end)
	}
	r.decodedTo = max(u.end, u.recv)
	if j := r.running; j != nil && j.u == u && j.kind == jobPartial && !r.partialWillServe(j, u.spokenTo(u.untrimmedEnd())) {
		// A partial of this utterance is running: the final decode matters more.
		r.cancel()
	}
}

// decodesEnd reports whether the engine decodes an utterance's end itself, by FinalOf
// or by a peek, rather than with Final after everything was fed.
func (r *runner) decodesEnd() bool { return r.finalOf != nil || r.peeker != nil }

// setEnd fixes the end of the audio an utterance's final decode covers. A decode of
// different audio (a speculation the end of turn did not confirm) is dropped. Audio fed
// to the streaming pass stays: a peek cannot take it back.
func (r *runner) setEnd(u *utterance, end int64) {
	u.end = end
	u.cut(max(end, u.fed))
	if u.fin != nil && u.fin.end != end {
		r.dropFinal(u, "the end of turn moved the end of the audio")
	}
}

// dropFinal abandons the utterance's FinalOf decode: its job is cancelled if it still
// runs, and its result will be ignored.
func (r *runner) dropFinal(u *utterance, why string) {
	f := u.fin
	if f == nil {
		return
	}
	u.fin = nil
	running := r.running != nil && r.running.seq == f.seq
	if running {
		r.cancel()
	}
	r.log.Debug("speculative final dropped", zap.Int("utterance", u.id), zap.String("why", why),
		zap.Bool("running", running), zap.Duration("audio_end", durOf(f.end)))
}

func (r *runner) endInput() {
	r.inputDone = true
	if u := r.cur; u != nil {
		r.cur = nil
		u.ended = true
		u.eotAt = r.p.Now()
		if r.decodesEnd() {
			r.setEnd(u, u.recv)
		} else {
			u.end = u.recv
		}
		r.decodedTo = u.end
	}
}
