package asr

import "go.uber.org/zap"

// Quick finals (QuickFinals): an engine whose partials decode everything fed from nothing
// (whisper) need not decode an utterance once more at its end when its latest partial
// already decoded all of the speech. The final is then that partial's hypothesis, at no
// cost after the user stopped; the audio it decoded differs from the final's only by
// the silence after the speech (the VAD's), more or less of it.

// partialDecode is a partial hypothesis of an utterance's audio from its start to end.
type partialDecode struct {
	end  int64
	hyp  Hypothesis
	done bool
}

// partialServes reports whether partial p can be the final of an utterance whose speech
// ends at speechEnd (before the VAD's padding, when known: utterance.spokenTo): quick
// finals are on and p decoded the audio up to the speech's end or beyond (what follows
// the speech is silence, by the VAD).
func partialServes(quick bool, p partialDecode, speechEnd int64) bool {
	return quick && p.done && speechEnd >= 0 && p.end >= speechEnd
}

// spokenTo returns where the speech that ends at padded (a padded segment end, -1 when
// unknown) stopped, as its pause said: the padding is silence to the VAD, so a partial
// that stops within it decoded all the speech. Taking the hop partial running at the
// pause when it stops there saves a decode after the pause (a whisper decode: 100–200
// ms on 2 cores).
func (u *utterance) spokenTo(padded int64) int64 {
	if padded >= 0 && padded == u.pauseEnd {
		return u.pauseSpeech
	}
	return padded
}

// partialAtPause reports whether a partial decode is due at once, whatever the hop:
// quick finals are on, and the speech paused (the VAD's pause, tentative or sure) with
// its end at speechEnd, which the audio received covers and the audio fed does not.
// That partial is the one the final will be taken from, within the end-of-turn hold.
func partialAtPause(quick, paused bool, fed, recv, speechEnd int64) bool {
	return quick && paused && speechEnd >= 0 && fed < speechEnd && recv >= speechEnd
}

// partialWillServe reports whether the running partial job j will decode the audio up to
// speechEnd, so that the final waits for it instead of cancelling it.
func (r *runner) partialWillServe(j *job, speechEnd int64) bool {
	return partialServes(r.quick, partialDecode{end: j.from + int64(len(j.feed)), done: true}, speechEnd)
}

// finalFromPartial makes u's latest partial its final decode up to end, when it decoded
// all the speech (up to speechEnd), and reports whether it did.
func (r *runner) finalFromPartial(u *utterance, end, speechEnd int64, speculative bool) bool {
	if !partialServes(r.quick, u.partial, speechEnd) {
		return false
	}
	u.fin = &finalDecode{end: end, speculative: speculative, started: r.p.Now(), done: true, hyp: u.partial.hyp}
	r.log.Debug("final taken from the latest partial", zap.Int("utterance", u.id), zap.Bool("speculative", speculative),
		zap.Duration("partial_end", durOf(u.partial.end)), zap.Duration("speech_end", durOf(speechEnd)))
	return true
}
