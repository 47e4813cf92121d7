package vad

// detector turns a stream of per-window speech probabilities into speech segments as
// they happen. Its segmentation is libwhisper's
// (whisper_vad_segments_from_probs) made causal:
//
//   - speech starts at the first window whose probability reaches Threshold;
//   - once in speech, a window below NegThreshold starts a possible end (the first such
//     window's position); a window at or above Threshold cancels it, windows in between
//     neither start nor cancel it (hysteresis);
//   - the speech ends at that position once MinSilence has passed since it, and is kept
//     only if it lasted more than MinSpeech;
//   - with EndTrim (not libwhisper's), an end, once decided, is dated where the audio's
//     level fell, up to EndTrim before the window where the probability did
//     (levelTrack): the merge gap and the padding count from there;
//   - kept segments closer than MergeGap are merged;
//   - every segment is padded by SpeechPad on both sides.
//
// Because the batch rules look ahead (a short blip is only known to be noise once it has
// ended; two segments merge only if the gap stays short), the streaming detector confirms
// events after the fact: an onset once the speech has lasted more than MinSpeech, an end
// once MergeGap (at least MinSilence) has passed without new speech. Without EndTrim the
// segments it reports are exactly the batch segments; only when they are reported differs.
//
// All positions are sample indices in the stream. A detector is owned by one goroutine.
type detector struct {
	p      detectorParams
	window int64 // samples per probability
	base   int64 // stream position of the first window
	next   int64 // stream position of the next window
	limit  int64 // stream position of the end of the real samples (for clamping)

	// The batch algorithm's running state.
	inSpeech   bool  // a speech candidate (not yet known to be kept) is running
	start      int64 // its first window
	hasTempEnd bool
	tempEnd    int64 // start of the silence that may end it
	voiceEnd   int64 // where the voice stopped before tempEnd (tempEnd without EndTrim)
	// levels follows the audio's level when EndTrim is on (nil otherwise).
	levels *levelTrack
	// tentative: a tentative evPause of the open segment is out, for the speech ending
	// at tentativeEnd (its tempEnd then).
	tentative    bool
	tentativeEnd int64

	// open is the current kept segment, reported by an onset and not ended yet.
	open *openSegment
	// candidate is set while a reported evCandidate awaits its onset or its drop.
	candidate bool
}

// detectorParams are Config's segmentation settings, in samples.
type detectorParams struct {
	threshold, negThreshold float32
	minSpeech, minSilence   int64
	pad, mergeGap           int64
	// pauseAfter, when above zero and below minSilence, reports tentative pauses.
	pauseAfter int64
	// endTrim, when above zero, dates ends by the audio's level (Config.EndTrim).
	endTrim int64
}

type openSegment struct {
	start  int64 // raw start (first speech window)
	rawEnd int64 // raw end (start of the final silence) once ended
	ended  bool  // rawEnd is set; waiting for MergeGap to pass
	// trim is how far before Silero's fall rawEnd is dated (EndTrim; 0 without it).
	trim int64
}

// eventKind says what a detector event reports.
type eventKind uint8

const (
	// evOnset: a segment is confirmed; Start is its padded start.
	evOnset eventKind = iota + 1
	// evEnd: the segment reported by the last onset ended; End is its padded end.
	evEnd
	// evCandidate: speech may be starting (the first window at the threshold while no
	// segment is open); an evOnset confirms it or an evDropped withdraws it. Listeners
	// that must react at once (pausing the agent's voice) use it.
	evCandidate
	// evDropped: the candidate ended too short to be speech.
	evDropped
	// evPause: the open segment's speech stopped MinSilence ago; End is the padded end
	// it will have unless speech resumes within MergeGap (then evResume). Listeners
	// that prepare for the end (a speculative final decode) start here, MergeGap −
	// MinSilence before evEnd.
	evPause
	// evResume: the speech of a paused segment went on; its evPause is void.
	evResume
	// evPauseSure: a tentative evPause (PauseAfter of silence, less than MinSilence)
	// held until MinSilence: the segment ends there unless speech resumes within
	// MergeGap, as after a plain evPause.
	evPauseSure
)

func (k eventKind) String() string {
	switch k {
	case evOnset:
		return "onset"
	case evEnd:
		return "end"
	case evCandidate:
		return "candidate"
	case evDropped:
		return "dropped"
	case evPause:
		return "pause"
	case evResume:
		return "resume"
	case evPauseSure:
		return "pause-sure"
	}
	return "event?"
}

// event is something the detector found. Positions are stream sample indices.
type event struct {
	Kind eventKind
	// Start and End of the segment (evOnset sets Start and RawStart, evEnd all three).
	Start, End int64
	// RawStart is the first speech window of the segment, before padding; RawEnd (of an
	// evPause) where its speech stopped, before padding.
	RawStart, RawEnd int64
	// At is the stream position where the event was decided (the end of the window that
	// decided it).
	At int64
	// Tentative marks an evPause reported after PauseAfter of silence, before MinSilence
	// made it sure (evPauseSure) or speech resumed (evResume).
	Tentative bool
	// Trimmed (of an evPause or evEnd) is how much earlier End is than it would be
	// without EndTrim: the padded end of the window where the probability fell.
	Trimmed int64
}

// newDetector returns a detector for windows of window samples starting at stream
// position base.
func newDetector(p detectorParams, window, base int64) *detector {
	if p.mergeGap < 2*p.pad {
		// Segments closer than twice the padding would overlap once padded; libwhisper
		// splits the gap between them instead. Merging them is what a listener hears.
		p.mergeGap = 2 * p.pad
	}
	if p.mergeGap < p.minSilence {
		// No gap is shorter than MinSilence anyway (an end is decided only after that
		// much silence); the floor keeps an ended segment open until then.
		p.mergeGap = p.minSilence
	}
	d := &detector{p: p, window: window, base: base, next: base, limit: base}
	if p.endTrim > 0 {
		d.levels = newLevelTrack(base)
	}
	return d
}

// Hear takes the samples that the next probabilities score, before them: with EndTrim,
// their level dates the ends. Without it, or without a call, ends are Silero's.
func (d *detector) Hear(samples []float32) {
	if d.levels != nil {
		d.levels.hear(samples)
	}
}

// Push processes the probability of the next window, which holds real samples up to
// stream position realEnd (at most the window's end; less for a zero-padded last
// window), and returns the events it decided, in order.
func (d *detector) Push(prob float32, realEnd int64) []event {
	s := d.next
	d.next += d.window
	d.limit = max(d.limit, min(realEnd, d.next))
	var evs []event
	p := &d.p

	// The batch rules, one window at a time.
	if prob >= p.threshold && d.hasTempEnd {
		d.hasTempEnd = false
		if d.tentative {
			d.tentative = false
			evs = append(evs, event{Kind: evResume, RawStart: d.open.start, At: d.next})
		}
	}
	switch {
	case prob >= p.threshold && !d.inSpeech:
		d.inSpeech = true
		d.start = s
		if d.open == nil {
			// Nothing is open that this could continue: new speech may be starting.
			d.candidate = true
			evs = append(evs, event{Kind: evCandidate, Start: max(s-p.pad, d.base), RawStart: s, At: d.next})
		}
	case prob < p.negThreshold && d.inSpeech:
		if !d.hasTempEnd {
			d.hasTempEnd = true
			d.tempEnd, d.voiceEnd = s, s
			if d.levels != nil {
				d.voiceEnd = d.levels.voiceEnd(s, p.endTrim, d.start+d.window)
			}
		}
		// Whether the speech ended, and was long enough, is Silero's to say, as in
		// libwhisper: the level also falls in a word's stop consonant, which Silero
		// hears through. Only where it ended is the level's.
		if s-d.tempEnd >= p.minSilence {
			kept := d.tempEnd-d.start > p.minSpeech
			evs = d.speechEnded(kept, d.voiceEnd, d.tempEnd-d.voiceEnd, evs)
		} else if p.pauseAfter > 0 && !d.tentative && s-d.tempEnd >= p.pauseAfter && d.continuesOpen() {
			// Not sure yet, but the speech may have ended: listeners that get ready for
			// the end (a reply prepared ahead) may start now.
			d.tentative, d.tentativeEnd = true, d.voiceEnd
			evs = append(evs, event{Kind: evPause, Start: max(d.open.start-p.pad, d.base),
				End: min(d.voiceEnd+p.pad, d.limit), RawStart: d.open.start, RawEnd: d.voiceEnd, At: d.next, Tentative: true,
				Trimmed: d.trimmed(d.voiceEnd, d.tempEnd-d.voiceEnd)})
		}
	}
	evs = d.confirm(evs)
	evs = d.settle(evs)
	return evs
}

// continuesOpen reports whether the running speech is the open segment's (confirmed,
// and not ended), so that a pause in it is the segment's.
func (d *detector) continuesOpen() bool {
	return d.inSpeech && d.open != nil && !d.open.ended && d.start >= d.open.start
}

// speechEnded closes the running candidate at end, dated trim before Silero's fall; kept
// says whether it lasted long enough to be a segment.
func (d *detector) speechEnded(kept bool, end, trim int64, evs []event) []event {
	start := d.start
	tentative := d.tentative
	d.inSpeech, d.hasTempEnd, d.tentative = false, false, false
	if !kept {
		if d.candidate {
			d.candidate = false
			evs = append(evs, event{Kind: evDropped, RawStart: start, At: d.next})
		}
		return evs
	}
	if d.open == nil || d.open.ended && start-d.open.rawEnd >= d.p.mergeGap {
		// Kept but never confirmed: only possible when the candidate ended in the very
		// window that would have confirmed it. Report the onset now.
		evs = d.onset(start, evs)
	}
	if d.open.ended {
		// Merged into a segment that had paused (in the same window that would have
		// confirmed the merge): that pause is void.
		evs = append(evs, event{Kind: evResume, RawStart: d.open.start, At: d.next})
	}
	d.open.rawEnd, d.open.ended, d.open.trim = end, true, trim
	if tentative && end == d.tentativeEnd {
		return append(evs, event{Kind: evPauseSure, RawStart: d.open.start, At: d.next})
	}
	if tentative {
		evs = append(evs, event{Kind: evResume, RawStart: d.open.start, At: d.next})
	}
	return append(evs, d.pause())
}

// pause is the evPause of the open segment, which has ended at its rawEnd.
func (d *detector) pause() event {
	o := d.open
	return event{Kind: evPause, Start: max(o.start-d.p.pad, d.base), End: min(o.rawEnd+d.p.pad, d.limit), RawStart: o.start, RawEnd: o.rawEnd, At: d.next,
		Trimmed: d.trimmed(o.rawEnd, o.trim)}
}

// trimmed is how much earlier the padded end of speech that stopped at rawEnd, dated
// trim before Silero's fall, is than the padded end at the fall.
func (d *detector) trimmed(rawEnd, trim int64) int64 {
	return min(rawEnd+trim+d.p.pad, d.limit) - min(rawEnd+d.p.pad, d.limit)
}

// confirm reports the onset of a running candidate as soon as it is sure to be kept.
func (d *detector) confirm(evs []event) []event {
	if !d.inSpeech {
		return evs
	}
	// The candidate's end, when it comes, is no earlier than the pending silence start
	// or, without one, than the next window.
	earliestEnd := d.next
	if d.hasTempEnd {
		earliestEnd = d.tempEnd
	}
	if earliestEnd-d.start <= d.p.minSpeech {
		return evs
	}
	if d.open != nil && d.open.ended && d.start-d.open.rawEnd < d.p.mergeGap {
		// It continues the open segment: the pending end is withdrawn.
		d.open.ended = false
		return append(evs, event{Kind: evResume, RawStart: d.open.start, At: d.next})
	}
	if d.open != nil && !d.open.ended {
		return evs // already part of the open segment
	}
	return d.onset(d.start, evs)
}

// onset reports a new segment starting at raw position start. An ended open segment is
// finished first.
func (d *detector) onset(start int64, evs []event) []event {
	if d.open != nil {
		evs = d.finish(evs)
	}
	d.open = &openSegment{start: start}
	padded := max(start-d.p.pad, d.base)
	d.candidate = false // confirmed
	return append(evs, event{Kind: evOnset, Start: padded, RawStart: start, At: d.next})
}

// finish reports the end of the open segment (which must have ended).
func (d *detector) finish(evs []event) []event {
	o := d.open
	d.open = nil
	start := max(o.start-d.p.pad, d.base)
	end := min(o.rawEnd+d.p.pad, d.limit)
	return append(evs, event{Kind: evEnd, Start: start, End: end, RawStart: o.start, At: d.next, Trimmed: d.trimmed(o.rawEnd, o.trim)})
}

// settle finishes an ended segment once nothing can merge into it any more.
func (d *detector) settle(evs []event) []event {
	if o := d.open; o != nil && o.ended {
		// A candidate that started within the merge gap may still be kept and merge.
		pendingMerge := d.inSpeech && d.start-o.rawEnd < d.p.mergeGap
		if d.next-o.rawEnd >= d.p.mergeGap && !pendingMerge {
			evs = d.finish(evs)
		}
	}
	return evs
}

// Finish ends the stream: a running candidate long enough to be speech becomes a
// segment ending at the end of the stream, and the open segment ends.
func (d *detector) Finish() []event {
	var evs []event
	if d.inSpeech {
		// libwhisper measures the last segment to the end of the (zero-padded) windows.
		// A silence that had started but was not long enough yet does not count: the
		// batch rules extend the segment to the end of the audio.
		kept := d.next-d.start > d.p.minSpeech
		evs = d.speechEnded(kept, d.next, 0, evs)
	}
	if d.open != nil {
		if !d.open.ended {
			d.open.rawEnd, d.open.ended, d.open.trim = d.next, true, 0
			evs = append(evs, d.pause())
		}
		evs = d.finish(evs)
	}
	return evs
}

// Position returns the stream position after the last window pushed.
func (d *detector) Position() int64 { return d.next }
