package asr

import (
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
)

// The utterance: the audio of one user turn as the module holds it, where its speech
// and its final decode stand, and the words it reported.

// audioRef is a received audio IU, kept for the pre-roll of the next utterance.
type audioRef struct {
	id      iu.ID
	start   int64
	samples []float32
}

func (a audioRef) end() int64 { return a.start + int64(len(a.samples)) }

type utterance struct {
	id    int
	start int64 // stream position of the first sample
	recv  int64 // stream position after the last sample received
	fed   int64 // stream position after the last sample handed to the streaming pass
	end   int64 // stream position after the last sample to decode (once ended)
	ended bool

	// audio holds the samples from start to recv. Workers get slices of it capped at
	// their length, so the module's appends never write where a worker reads.
	audio []float32
	// skipped counts stream samples missing from audio (gaps longer than audio.MaxGap are
	// not filled), so that audio[i] is at stream position start+skipped+i after them.
	skipped int64
	frames  []frameSpan
	started bool

	agree *LocalAgreement
	words []emitted
	// decoded is the Decoded IU that says how far the words reach (nil: none sent).
	decoded *iu.IU

	speechStart, speechEnd int64 // from the end of turn; -1 when unknown

	// The turn's speech segments, which tell when to speculate: seg is the open
	// segment ("" when none), segEnd the end of the last one that ended (-1: none yet)
	// or, while paused, the end the open one will have if its speech does not resume.
	// A tentative pause (sure false) stops feeding the silence after it, and is
	// speculated on when the final is a peek; a sure one always.
	seg    iu.ID
	segEnd int64
	paused bool
	sure   bool
	// pauseEnd is the padded end of the latest pause of the speech, pauseSpeech where its
	// speech stopped (-1: no pause yet): the VAD heard none between them.
	pauseEnd, pauseSpeech int64
	// trim is how much earlier the VAD dated the latest end of the speech than where its
	// model's probability fell (vad.Segment.Trimmed). segEnd, pauseEnd and pauseSpeech are
	// the untrimmed positions, and so is the audio every final decodes: trimming an end
	// makes the turn end sooner, and changes no word.
	trim int64
	// partial is the latest partial decode, when the engine's quick finals may take it
	// as the final (QuickFinals).
	partial partialDecode
	// fin is the final decode of the utterance (jobEnd), running or done: started
	// speculatively when the last segment ended, or at the end of turn.
	fin *finalDecode
	// own says whether the utterance's final is the streaming pass's own (a Peeker's
	// PeekFinal) or FinalOf's, once the engine said so after Start.
	own ownFinal
	// overAgent: the utterance began while the agent was audible (vad.Segment.Overlap)
	// and the agent was still audible at its pauses. Its final is FinalOf's
	// when the engine has one: a sound over the agent's voice (a backchannel) does not
	// sound like what the streaming pass adapted to, and its words decide whether it is
	// a turn at all. A barge-in has stopped the agent by the time the user pauses.
	overAgent bool
	// eotAt is when the end of turn arrived (clock time), for the latency log.
	eotAt time.Time
}

// ownFinal is what an engine said of an utterance's final (Peeker.OwnFinal).
type ownFinal uint8

const (
	ownUnknown ownFinal = iota // not started yet, or no Peeker
	ownYes                     // the streaming pass's own: fed to the end, then PeekFinal
	ownNo                      // FinalOf's
)

// finalDecode is a final decode of an utterance's audio from its start to end (a peek
// may cover some audio after end that partial decodes had fed already).
type finalDecode struct {
	seq         int // the job that runs it
	end         int64
	speculative bool // started before the end of turn
	started     time.Time
	done        bool
	hyp         Hypothesis
}

type frameSpan struct {
	id         iu.ID
	start, end int64
}

type emitted struct {
	u    iu.IU
	word Word
}

// take appends the part of an audio IU that belongs to the utterance.
func (u *utterance) take(a audioRef) {
	from := max(u.recv, a.start)
	to := a.end()
	if u.ended {
		to = min(to, u.end)
	}
	if to <= from {
		return
	}
	switch gap := from - u.recv; {
	case gap > audio.MaxGap:
		u.skipped += gap
	case gap > 0:
		// Missing audio (a dropped block, or history that does not reach back to the
		// pre-roll) becomes silence, so that the engine's word times stay stream times.
		u.audio = append(u.audio, make([]float32, gap)...)
	}
	u.audio = append(u.audio, a.samples[from-a.start:to-a.start]...)
	u.frames = append(u.frames, frameSpan{id: a.id, start: a.start, end: a.end()})
	u.recv = to
}

// index returns where stream position pos is in u.audio, within its bounds.
func (u *utterance) index(pos int64) int {
	return int(min(max(pos-u.start-u.skipped, 0), int64(len(u.audio))))
}

// span returns the audio from stream position from to to, for a worker.
func (u *utterance) span(from, to int64) []float32 {
	i, j := u.index(from), u.index(to)
	return u.audio[i:j:j]
}

// cut drops the audio after stream position pos.
func (u *utterance) cut(pos int64) {
	if u.recv <= pos {
		return
	}
	// Capped, so that an append after the cut copies instead of overwriting samples a
	// worker may still read.
	n := u.index(pos)
	u.audio = u.audio[:n:n]
	u.recv = pos
	u.fed = min(u.fed, pos)
}

func (u *utterance) complete(inputDone bool) bool {
	return u.ended && (u.recv >= u.end || inputDone)
}

func samplesOf(d time.Duration) int64 { return audio.DurationToSamples(d, audio.PipelineRate) }

func durOf(n int64) time.Duration { return audio.SamplesToDuration(n, audio.PipelineRate) }

// grounding returns the audio IUs overlapping [start, end) (at least the nearest one).
func (u *utterance) grounding(start, end int64) []iu.ID {
	if end <= start {
		end = start + 1
	}
	var ids []iu.ID
	for _, f := range u.frames {
		if f.end > start && f.start < end {
			ids = append(ids, f.id)
		}
	}
	if len(ids) == 0 && len(u.frames) > 0 {
		// Engines may place a word slightly past the audio they were given.
		ids = append(ids, u.frames[len(u.frames)-1].id)
	}
	return ids
}

// untrimmedEnd is the speech's end as the end of turn dates it (speechEnd), where the
// VAD's probability fell rather than where the level did: the recogniser's trailing audio
// counts from there.
func (u *utterance) untrimmedEnd() int64 { return u.speechEnd + u.trim }
