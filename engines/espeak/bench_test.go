package espeak

import (
	"context"
	"errors"
	"testing"
	"time"
)

const benchText = "The meeting is at half past three on Friday, and it should take about forty minutes."

// BenchmarkFirstPiece measures the time from Stream to its first piece of audio
// (first-piece-ms); the synthesis is stopped there.
func BenchmarkFirstPiece(b *testing.B) {
	s := newSynth(b, Options{})
	errEnough := errors.New("enough")
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		err := s.Stream(context.Background(), benchText, func(Piece) error {
			total += time.Since(start)
			return errEnough
		})
		if !errors.Is(err, errEnough) {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total)/float64(time.Millisecond)/float64(b.N), "first-piece-ms")
}

// BenchmarkSynthesize measures the real-time factor of whole syntheses: rtf is processing
// time over audio time.
func BenchmarkSynthesize(b *testing.B) {
	s := newSynth(b, Options{})
	var samples int
	b.ResetTimer()
	for range b.N {
		res, err := s.Synthesize(context.Background(), benchText)
		if err != nil {
			b.Fatal(err)
		}
		samples += len(res.Samples)
	}
	audioTime := float64(samples) / float64(s.SampleRate())
	b.ReportMetric(b.Elapsed().Seconds()/audioTime, "rtf")
	b.ReportMetric(audioTime/float64(b.N), "audio-s/op")
}
