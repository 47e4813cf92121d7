package vad

import (
	"math"

	"github.com/parley-voice/parley/audio"
)

// levelTrack keeps the level of the recent audio in short frames, so that the detector
// can date a speech end by the voice rather than by Silero. Silero's probability stays
// high for two to four 32 ms windows after the voice stops (its recurrent state decays
// slowly), so the window where it falls is 60–130 ms after the last sound of the word;
// the level falls within a frame of it.
type levelTrack struct {
	start   int64     // stream position of db[0]
	db      []float32 // level of each levelFrame samples, oldest first
	partial []float32 // samples of the frame not complete yet
}

const (
	// levelFrame is 8 ms at 16 kHz: a quarter of Silero's window.
	levelFrame = 128
	// levelKeep is how many frames are kept: a second, for the voice's recent peak.
	levelKeep = 125
	// voiceDrop is how far below the recent peak a frame counts as past the voice: the
	// decay of a word's last sound reaches it within a frame or two, and a room's noise
	// floor, when higher, keeps the end where Silero put it.
	voiceDrop = 25
)

func newLevelTrack(base int64) *levelTrack { return &levelTrack{start: base} }

// hear takes the next samples of the stream.
func (l *levelTrack) hear(samples []float32) {
	for len(samples) > 0 {
		n := min(levelFrame-len(l.partial), len(samples))
		l.partial = append(l.partial, samples[:n]...)
		samples = samples[n:]
		if len(l.partial) < levelFrame {
			return
		}
		l.db = append(l.db, float32(audio.DBFS(audio.RMS(l.partial))))
		l.partial = l.partial[:0]
		if drop := len(l.db) - levelKeep; drop > 0 {
			l.db = append(l.db[:0], l.db[drop:]...)
			l.start += int64(drop) * levelFrame
		}
	}
}

// voiceEnd returns where the voice stopped, at most back samples before end (where
// Silero's probability fell) and not before floor: the end of the last frame within
// voiceDrop of the peak before it, or the earliest it may go back to when none is that
// loud (the voice stopped further back). It returns end when the frames it needs are
// not heard (or no longer kept).
func (l *levelTrack) voiceEnd(end, back, floor int64) int64 {
	if back <= 0 || len(l.db) == 0 {
		return end
	}
	// Frame i covers [start+i·levelFrame, start+(i+1)·levelFrame); the voice may end at
	// the end of frame i-1 for i from first (no earlier than the bound) to last.
	last := (end - l.start) / levelFrame
	first := max((max(end-back, floor)-l.start+levelFrame-1)/levelFrame, 1)
	if last > int64(len(l.db)) || first > last {
		return end
	}
	peak := float32(math.Inf(-1))
	for _, v := range l.db[:last] {
		peak = max(peak, v)
	}
	for i := last; i >= first; i-- {
		if l.db[i-1] >= peak-voiceDrop {
			if i == last {
				return end // still loud where Silero's probability fell
			}
			return l.start + i*levelFrame
		}
	}
	return l.start + first*levelFrame
}
