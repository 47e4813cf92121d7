package vad

import (
	"math/rand/v2"
	"slices"
	"testing"
)

const testWindow = 512

// span is a segment in samples.
type span struct{ start, end int64 }

// batchSegments is libwhisper's whole-buffer segmentation (whisper_vad_segments_from_probs
// without the maximum speech duration), written the plain batch way as the reference the
// streaming detector must reproduce.
func batchSegments(probs []float32, p detectorParams, realLen int64) []span {
	var raw []span
	inSpeech, hasTemp := false, false
	var start, temp int64
	for i, pr := range probs {
		s := int64(i) * testWindow
		if pr >= p.threshold && hasTemp {
			hasTemp = false
		}
		if pr >= p.threshold && !inSpeech {
			inSpeech, start = true, s
			continue
		}
		if pr < p.negThreshold && inSpeech {
			if !hasTemp {
				hasTemp, temp = true, s
			}
			if s-temp < p.minSilence {
				continue
			}
			if temp-start > p.minSpeech {
				raw = append(raw, span{start, temp})
			}
			inSpeech, hasTemp = false, false
		}
	}
	audioLen := int64(len(probs)) * testWindow
	if inSpeech && audioLen-start > p.minSpeech {
		raw = append(raw, span{start, audioLen})
	}
	// Merge close segments.
	gap := max(p.mergeGap, 2*p.pad, p.minSilence)
	var merged []span
	for _, s := range raw {
		if n := len(merged); n > 0 && s.start-merged[n-1].end < gap {
			merged[n-1].end = s.end
			continue
		}
		merged = append(merged, s)
	}
	for i := range merged {
		merged[i].start = max(merged[i].start-p.pad, 0)
		merged[i].end = min(merged[i].end+p.pad, realLen)
	}
	return merged
}

// stream runs the detector over probs and returns the segments and the events.
func stream(probs []float32, p detectorParams, realLen int64) ([]span, []event) {
	d := newDetector(p, testWindow, 0)
	var evs []event
	for i, pr := range probs {
		end := min(int64(i+1)*testWindow, realLen)
		evs = append(evs, d.Push(pr, end)...)
	}
	evs = append(evs, d.Finish()...)
	var segs []span
	for _, e := range evs {
		if e.Kind == evEnd {
			segs = append(segs, span{e.Start, e.End})
		}
	}
	return segs, evs
}

func defaultParams() detectorParams { return DefaultConfig().params() }

// windows builds a probability sequence from (probability, number of windows) runs.
func windows(runs ...any) []float32 {
	var out []float32
	for i := 0; i < len(runs); i += 2 {
		p := float32(runs[i].(float64))
		for range runs[i+1].(int) {
			out = append(out, p)
		}
	}
	return out
}

func TestDetectorScripted(t *testing.T) {
	const w = testWindow
	// Windows are 32 ms: MinSpeech 250 ms is 7.8 windows, MinSilence 100 ms 3.1,
	// MergeGap 200 ms 6.25, EndOfTurn 700 ms 21.9.
	tests := []struct {
		name  string
		probs []float32
		want  []span // raw bounds in windows, before padding
	}{
		{"silence", windows(0.1, 50), nil},
		{"one segment", windows(0.0, 10, 0.9, 20, 0.0, 40), []span{{10 * w, 30 * w}}},
		{"blip shorter than min speech is dropped", windows(0.0, 10, 0.9, 7, 0.0, 40), nil},
		{"eight windows are enough", windows(0.0, 10, 0.9, 8, 0.0, 40), []span{{10 * w, 18 * w}}},
		{"hysteresis: between thresholds does not end speech", windows(0.0, 5, 0.9, 10, 0.4, 30, 0.9, 5, 0.0, 40), []span{{5 * w, 50 * w}}},
		{"hysteresis: between thresholds does not start speech", windows(0.0, 5, 0.45, 30, 0.0, 40), nil},
		{"short silence does not end speech", windows(0.0, 5, 0.9, 10, 0.1, 3, 0.9, 10, 0.0, 40), []span{{5 * w, 28 * w}}},
		{"gap under merge gap merges", windows(0.0, 5, 0.9, 10, 0.1, 6, 0.9, 10, 0.0, 40), []span{{5 * w, 31 * w}}},
		{"gap over merge gap splits", windows(0.0, 5, 0.9, 10, 0.1, 7, 0.9, 10, 0.0, 40), []span{{5 * w, 15 * w}, {22 * w, 32 * w}}},
		{"blip inside merge gap does not merge", windows(0.0, 5, 0.9, 10, 0.1, 5, 0.9, 2, 0.1, 30, 0.9, 10, 0.0, 40), []span{{5 * w, 15 * w}, {52 * w, 62 * w}}},
		{"speech to the end of the stream", windows(0.0, 5, 0.9, 20), []span{{5 * w, 25 * w}}},
		{"short speech at the end is dropped", windows(0.0, 5, 0.9, 5), nil},
		{"silence started but too short at the end", windows(0.0, 5, 0.9, 20, 0.0, 2), []span{{5 * w, 27 * w}}},
	}
	p := defaultParams()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			realLen := int64(len(tc.probs)) * w
			var want []span
			for _, s := range tc.want {
				want = append(want, span{max(s.start-p.pad, 0), min(s.end+p.pad, realLen)})
			}
			if ref := batchSegments(tc.probs, p, realLen); !slices.Equal(ref, want) {
				t.Fatalf("reference segmentation %v, test expects %v", ref, want)
			}
			got, _ := stream(tc.probs, p, realLen)
			if !slices.Equal(got, want) {
				t.Fatalf("segments %v, want %v", got, want)
			}
		})
	}
}

func TestDetectorCandidates(t *testing.T) {
	const w = testWindow
	tests := []struct {
		name  string
		probs []float32
		want  []eventKind
	}{
		{"a click is withdrawn", windows(0.0, 10, 0.9, 3, 0.0, 40), []eventKind{evCandidate, evDropped}},
		{"speech is confirmed", windows(0.0, 10, 0.9, 20, 0.0, 60), []eventKind{evCandidate, evOnset, evPause, evEnd}},
		{"a gap shorter than MinSilence is no pause", windows(0.0, 10, 0.9, 20, 0.0, 2, 0.9, 20, 0.0, 60), []eventKind{evCandidate, evOnset, evPause, evEnd}},
		{"speech resumed within MergeGap voids the pause", windows(0.0, 10, 0.9, 20, 0.0, 5, 0.9, 20, 0.0, 60), []eventKind{evCandidate, evOnset, evPause, evResume, evPause, evEnd}},
		{"two clicks", windows(0.0, 5, 0.9, 2, 0.0, 10, 0.9, 2, 0.0, 30), []eventKind{evCandidate, evDropped, evCandidate, evDropped}},
		{"speech running into the end of the stream", windows(0.0, 5, 0.9, 30), []eventKind{evCandidate, evOnset, evPause, evEnd}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, evs := stream(tt.probs, defaultParams(), int64(len(tt.probs))*w)
			var kinds []eventKind
			for _, e := range evs {
				kinds = append(kinds, e.Kind)
			}
			if !slices.Equal(kinds, tt.want) {
				t.Fatalf("events %v, want %v", kinds, tt.want)
			}
		})
	}
}

func TestDetectorEventTiming(t *testing.T) {
	const w = testWindow
	p := defaultParams()
	probs := windows(0.0, 10, 0.9, 20, 0.0, 60)
	_, evs := stream(probs, p, int64(len(probs))*w)
	kinds := make([]eventKind, len(evs))
	for i, e := range evs {
		kinds[i] = e.Kind
	}
	if !slices.Equal(kinds, []eventKind{evCandidate, evOnset, evPause, evEnd}) {
		t.Fatalf("events %v", kinds)
	}
	// Possible speech is announced by the first speech window, 250 ms before the onset.
	if cand := evs[0]; cand.At != int64(10+1)*w || cand.RawStart != 10*w || cand.Start != 10*w-p.pad {
		t.Errorf("candidate %+v, want it decided at the end of window 10", cand)
	}
	onset, pause, end := evs[1], evs[2], evs[3]
	// The onset is confirmed as soon as the speech is sure to last more than MinSpeech:
	// after the window that ends 250 ms past the start.
	if wantAt := int64(10+8) * w; onset.At != wantAt {
		t.Errorf("onset confirmed at %d, want %d", onset.At, wantAt)
	}
	if onset.Start != 10*w-p.pad || onset.RawStart != 10*w {
		t.Errorf("onset start %d raw %d", onset.Start, onset.RawStart)
	}
	// The pause is reported at the end of the first window that starts MinSilence
	// after the raw end (window 30), with the end the segment will have.
	if pause.At < 30*w+p.minSilence || pause.At > 30*w+p.minSilence+2*w {
		t.Errorf("pause reported at %d, want within two windows after %d", pause.At, 30*w+p.minSilence)
	}
	if pause.End != 30*w+p.pad || pause.RawEnd != 30*w {
		t.Errorf("pause end %d raw %d, want %d and %d", pause.End, pause.RawEnd, 30*w+p.pad, 30*w)
	}
	// The end is reported once MergeGap has passed since the raw end (window 30).
	if end.At < 30*w+p.mergeGap || end.At > 30*w+p.mergeGap+w {
		t.Errorf("end reported at %d, want within a window after %d", end.At, 30*w+p.mergeGap)
	}
	if end.End != 30*w+p.pad {
		t.Errorf("end %d, want %d", end.End, 30*w+p.pad)
	}
}

// TestDetectorMatchesBatch drives the detector with random probability sequences and
func withPauseAfter(p detectorParams, after int64) detectorParams {
	p.pauseAfter = after
	return p
}

// TestDetectorTentativePauses: with PauseAfter a pause is reported, tentative, after that
// much silence; speech before MinSilence withdraws it, MinSilence makes it sure, and the
// segmentation is the same.
func TestDetectorTentativePauses(t *testing.T) {
	const w = testWindow
	p := withPauseAfter(defaultParams(), w)
	tests := []struct {
		name  string
		probs []float32
		want  []eventKind
	}{
		{"the speech ends", windows(0.0, 10, 0.9, 20, 0.0, 60), []eventKind{evCandidate, evOnset, evPause, evPauseSure, evEnd}},
		{"a gap shorter than MinSilence withdraws it", windows(0.0, 10, 0.9, 20, 0.0, 2, 0.9, 20, 0.0, 60), []eventKind{evCandidate, evOnset, evPause, evResume, evPause, evPauseSure, evEnd}},
		{"one silent window is no pause yet", windows(0.0, 10, 0.9, 20, 0.0, 1, 0.9, 20, 0.0, 60), []eventKind{evCandidate, evOnset, evPause, evPauseSure, evEnd}},
		{"speech resumed within MergeGap", windows(0.0, 10, 0.9, 20, 0.0, 5, 0.9, 20, 0.0, 60), []eventKind{evCandidate, evOnset, evPause, evPauseSure, evResume, evPause, evPauseSure, evEnd}},
		{"speech running into the end of the stream", windows(0.0, 5, 0.9, 30), []eventKind{evCandidate, evOnset, evPause, evEnd}},
		{"a tentative pause at the end of the stream", windows(0.0, 5, 0.9, 30, 0.0, 2), []eventKind{evCandidate, evOnset, evPause, evResume, evPause, evEnd}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			realLen := int64(len(tt.probs)) * w
			got, evs := stream(tt.probs, p, realLen)
			var kinds []eventKind
			for _, e := range evs {
				kinds = append(kinds, e.Kind)
			}
			if !slices.Equal(kinds, tt.want) {
				t.Fatalf("events %v, want %v", kinds, tt.want)
			}
			checkEventOrder(t, evs)
			if want := batchSegments(tt.probs, p, realLen); !slices.Equal(got, want) {
				t.Errorf("segments %v, want %v", got, want)
			}
			for _, e := range evs {
				if e.Kind == evPause && e.Tentative && e.At-e.End+p.pad > p.minSilence {
					t.Errorf("tentative pause %+v reported after MinSilence", e)
				}
				if e.Kind == evPause && e.RawEnd != e.End-p.pad && e.End != realLen {
					t.Errorf("pause %+v: its raw end is not its end less the padding", e)
				}
			}
		})
	}
}

// checks that it finds exactly the batch segmentation, that events come in a valid
// order, and that no onset is reported for speech that is later dropped.
func TestDetectorMatchesBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	params := []detectorParams{
		defaultParams(),
		{threshold: 0.5, negThreshold: 0.35, minSpeech: 0, minSilence: 0, pad: 0, mergeGap: 0},
		{threshold: 0.6, negThreshold: 0.2, minSpeech: 1600, minSilence: 3200, pad: 800, mergeGap: 1000},
		withPauseAfter(defaultParams(), testWindow),
		{threshold: 0.6, negThreshold: 0.2, minSpeech: 1600, minSilence: 3200, pad: 800, mergeGap: 1000, pauseAfter: 1000},
	}
	for iter := 0; iter < 3000; iter++ {
		p := params[iter%len(params)]
		n := 1 + rng.IntN(300)
		probs := make([]float32, n)
		state := rng.Float32()
		for i := range probs {
			// A sticky random walk gives runs of speech and silence of varied lengths.
			if rng.Float32() < 0.15 {
				state = rng.Float32()
			}
			probs[i] = state
		}
		realLen := int64(n)*testWindow - int64(rng.IntN(testWindow))
		want := batchSegments(probs, p, realLen)
		got, evs := stream(probs, p, realLen)
		if !slices.Equal(got, want) {
			t.Fatalf("iteration %d: segments %v, want %v\nprobs %v", iter, got, want, probs)
		}
		checkEventOrder(t, evs)
	}
}

func checkEventOrder(t *testing.T, evs []event) {
	t.Helper()
	open, paused, tentative := false, false, false
	var last, pauseEnd int64
	for _, e := range evs {
		if e.At < last {
			t.Fatalf("events out of stream order: %v", evs)
		}
		last = e.At
		switch e.Kind {
		case evOnset:
			if open {
				t.Fatalf("onset while a segment is open: %v", evs)
			}
			if e.At < e.RawStart {
				t.Fatalf("onset reported before it happened: %v", e)
			}
			open = true
		case evPause:
			if !open || paused {
				t.Fatalf("pause without an open segment or twice: %v", evs)
			}
			paused, tentative, pauseEnd = true, e.Tentative, e.End
		case evPauseSure:
			if !paused || !tentative {
				t.Fatalf("a pause made sure that was not tentative: %v", evs)
			}
			tentative = false
		case evResume:
			if !paused {
				t.Fatalf("resume without a pause: %v", evs)
			}
			paused, tentative = false, false
		case evEnd:
			if !open {
				t.Fatalf("end without onset: %v", evs)
			}
			if !paused || tentative || e.End != pauseEnd {
				t.Fatalf("end %v without a sure pause at its end (paused %v, tentative %v, at %d): %v", e, paused, tentative, pauseEnd, evs)
			}
			open, paused = false, false
		}
	}
	if open {
		t.Fatalf("stream finished with an open segment: %v", evs)
	}
}

func FuzzDetector(f *testing.F) {
	f.Add([]byte{0, 0, 200, 200, 200, 200, 200, 200, 200, 200, 200, 0, 0, 0, 0, 0}, uint16(300))
	f.Fuzz(func(t *testing.T, raw []byte, cut uint16) {
		if len(raw) == 0 {
			return
		}
		probs := make([]float32, len(raw))
		for i, b := range raw {
			probs[i] = float32(b) / 255
		}
		p := defaultParams()
		if cut%2 == 1 {
			p = withPauseAfter(p, testWindow)
		}
		realLen := int64(len(probs))*testWindow - int64(cut)%testWindow
		want := batchSegments(probs, p, realLen)
		got, evs := stream(probs, p, realLen)
		if !slices.Equal(got, want) {
			t.Fatalf("segments %v, want %v", got, want)
		}
		checkEventOrder(t, evs)
	})
}
