package prosody

import (
	"math"
	"testing"

	"github.com/parley-voice/parley/audio/pitch"
)

// voiced synthesises a vowel whose pitch glides from f0 to f1 Hz over dur seconds:
// glottal pulses through formants at 700, 1200 and 2600 Hz.
func voiced(f0, f1, dur float64) []float32 {
	v := pitch.Vowel(Rate, f0, f1, int(dur*Rate))
	out := make([]float32, len(v))
	for i, y := range v {
		out[i] = float32(y * 0.3)
	}
	return out
}

func silence(dur float64) []float32 { return make([]float32, int(dur*Rate)) }

func concat(parts ...[]float32) []float32 {
	var out []float32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestEnding(t *testing.T) {
	// A phrase in the middle register (rising to 160 Hz and back), then its ending.
	phrase := func(ending []float32) []float32 {
		return concat(silence(0.1), voiced(105, 160, 0.3), silence(0.05), voiced(160, 115, 0.3), silence(0.05), ending)
	}
	tests := []struct {
		name  string
		audio []float32
		want  Cue
	}{
		{"a fall into the low register", phrase(voiced(115, 85, 0.35)), Falling},
		{"a level ending", phrase(voiced(122, 124, 0.35)), Level},
		{"a question's rise", phrase(voiced(125, 180, 0.35)), Rising},
		{"a monotone voice says nothing", concat(silence(0.1), voiced(100, 101, 0.6), silence(0.05), voiced(101, 99, 0.4)), Unknown},
		{"too short to tell", concat(silence(0.1), voiced(120, 90, 0.1)), Unknown},
		{"silence", silence(1), Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker()
			// In pieces, as frames come.
			for i := 0; i < len(tt.audio); i += 320 {
				tr.Push(tt.audio[i:min(i+320, len(tt.audio))])
			}
			if got := tr.Ending(0, int64(len(tt.audio))); got != tt.want {
				t.Errorf("Ending = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPitchOf: the period, not a multiple of it, over the voice's range.
func TestPitchOf(t *testing.T) {
	for _, hz := range []float64{65, 90, 120, 180, 250, 350} {
		s := voiced(hz, hz, 0.1)
		x := make([]float64, window)
		for i := range x {
			x[i] = float64(s[len(s)-window+i])
		}
		got := pitchOf(newCorrelator(), x)
		if math.Abs(12*math.Log2(got/hz)) > 0.5 {
			t.Errorf("pitch of %v Hz: %.1f Hz", hz, got)
		}
	}
}

// TestTrackerForgets: hours of audio keep only the last seconds of frames.
func TestTrackerForgets(t *testing.T) {
	tr := NewTracker()
	chunk := voiced(120, 120, 1)
	for range 30 {
		tr.Push(chunk)
	}
	if n := len(tr.frames); n > int(2*keep.Seconds()*100) {
		t.Errorf("%d frames kept after 30 s", n)
	}
	tr.Skip(Rate)
	tr.Push(chunk)
	if last := tr.frames[len(tr.frames)-1].pos; last != 32*Rate {
		t.Errorf("after a gap of a second, the last frame ends at %d, want %d", last, 32*Rate)
	}
}
