package vad

import (
	"testing"
)

// TestEndDatedByLevel: Silero's probability falls three windows after the voice stops;
// with end_trim the segment ends, and its end is decided, where the level fell, and its
// pause and end say how much earlier that is (Trimmed), so that a recogniser can decode
// the audio it would without end_trim.
func TestEndDatedByLevel(t *testing.T) {
	const w = testWindow
	p := detectorParams{threshold: 0.5, negThreshold: 0.35, minSpeech: 4 * w, minSilence: 3 * w, pad: 0, mergeGap: 6 * w}
	// Voice for 20 windows and a quarter, then silence; the probability stays up for
	// three more windows.
	voiceEnd := int64(20*w + w/4)
	run := func(trim int64, hear bool) (end, decidedAt int64) {
		t.Helper()
		var pauseTrimmed int64 = -1
		p := p
		p.endTrim = trim
		d := newDetector(p, w, 0)
		for i := range 40 {
			samples := make([]float32, w)
			for j := range samples {
				if int64(i*w+j) < voiceEnd {
					samples[j] = 0.3
				} else {
					samples[j] = 0.0003 // 60 dB below
				}
			}
			if hear {
				d.Hear(samples)
			}
			prob := float32(0.01)
			if i < 23 {
				prob = 0.99
			}
			for _, ev := range d.Push(prob, int64(i+1)*w) {
				switch ev.Kind {
				case evPause:
					pauseTrimmed = ev.Trimmed
				case evEnd:
					if ev.End+ev.Trimmed != 23*w || pauseTrimmed != ev.Trimmed {
						t.Errorf("end_trim %d: the end %d is trimmed by %d (its pause by %d), want Silero's end %d", trim, ev.End, ev.Trimmed, pauseTrimmed, 23*w)
					}
					return ev.End, ev.At
				}
			}
		}
		t.Fatal("no end")
		return 0, 0
	}
	sileroEnd, sileroAt := run(0, true)
	if sileroEnd != 23*w {
		t.Fatalf("without end_trim the end is %d, want Silero's %d", sileroEnd, 23*w)
	}
	end, at := run(3*w, true)
	// The level is known in 8 ms frames: the end is the first frame boundary after the voice.
	if want := (voiceEnd + levelFrame - 1) / levelFrame * levelFrame; end != want {
		t.Errorf("with end_trim the end is %d, want %d (the voice stops at %d)", end, want, voiceEnd)
	}
	if at >= sileroAt {
		t.Errorf("with end_trim the end was decided at %d, not before Silero's %d", at, sileroAt)
	}
	// Never further back than end_trim: with one window, whose audio is all quiet, the
	// voice stopped before it may look, and the end is as early as it may be.
	if end, _ := run(w, true); end != sileroEnd-w {
		t.Errorf("end_trim of a window: the end is %d, want %d", end, sileroEnd-w)
	}
	// Without the audio's level the end stays Silero's.
	if end, _ := run(3*w, false); end != sileroEnd {
		t.Errorf("end_trim without levels: the end is %d, want Silero's %d", end, sileroEnd)
	}
}
