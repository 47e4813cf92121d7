package aec

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/parley-voice/parley/audio"
)

// ErrClosed is returned (wrapped) by a Stream's methods after Close.
var ErrClosed = errors.New("aec: use of closed canceller")

// Stream adapts a frame Engine to blocks of any length. Render audio is passed on in
// whole frames as they fill up (a partial frame waits for the next Render, so the
// reference can reach the engine up to one frame late). Capture audio is processed in
// whole frames too; to return as many samples as it was given, Capture's output runs
// exactly one frame (10 ms for the engines here) behind its input, starting with one
// frame of silence. The engine's own algorithmic delay comes on top of that; Latency
// reports the sum.
//
// Samples that are not finite (NaN, ±Inf, as a broken source may deliver) reach the
// engine as silence: one NaN would otherwise stay in an adaptive filter for good.
//
// A Stream is owned by one goroutine.
type Stream struct {
	e      Engine
	n      int
	render []float32 // partial render frame
	in     []float32 // capture samples waiting for a whole frame
	out    []float32 // processed capture samples not returned yet
	// linear is the engine's linear output beside out, when it has one.
	linear []float32
	closed bool
}

var _ LinearCanceller = (*Stream)(nil)

// NewStream wraps an engine; the Stream owns it from now on and closes it (also when
// NewStream fails).
func NewStream(e Engine) (*Stream, error) {
	n := e.FrameSize()
	if n <= 0 {
		e.Close()
		return nil, fmt.Errorf("aec: engine frame size %d", n)
	}
	s := &Stream{
		e:      e,
		n:      n,
		render: make([]float32, 0, n),
		in:     make([]float32, 0, 2*n),
		out:    make([]float32, n, 3*n), // the latency: one frame of silence
	}
	if _, ok := e.(LinearEngine); ok {
		s.linear = make([]float32, n, 3*n)
	}
	return s, nil
}

// Render implements Canceller.
func (s *Stream) Render(far []float32) error {
	if s.closed {
		return fmt.Errorf("aec: render: %w", ErrClosed)
	}
	for len(far) > 0 {
		k := min(s.n-len(s.render), len(far))
		start := len(s.render)
		s.render = append(s.render, far[:k]...)
		sanitize(s.render[start:])
		far = far[k:]
		if len(s.render) == s.n {
			if err := s.e.ProcessRender(s.render); err != nil {
				s.render = s.render[:0]
				return fmt.Errorf("aec: render: %w", err)
			}
			s.render = s.render[:0]
		}
	}
	return nil
}

// Capture implements Canceller: the result is a new slice as long as near. If the
// engine fails on a frame, that frame goes out unprocessed (so the length promise
// holds), the rest is processed, and the first error is returned.
func (s *Stream) Capture(near []float32) ([]float32, error) {
	out, _, err := s.CaptureLinear(near)
	return out, err
}

// CaptureLinear implements LinearCanceller: linear is nil unless the engine is a
// LinearEngine. A frame the engine fails on goes out unprocessed in both.
func (s *Stream) CaptureLinear(near []float32) (out, linear []float32, err error) {
	if s.closed {
		return nil, nil, fmt.Errorf("aec: capture: %w", ErrClosed)
	}
	start := len(s.in)
	s.in = append(s.in, near...)
	sanitize(s.in[start:])
	var first error
	le, _ := s.e.(LinearEngine)
	done := 0
	for ; len(s.in)-done >= s.n; done += s.n {
		frame := s.in[done : done+s.n]
		start := len(s.out)
		s.out = append(s.out, frame...)
		var err error
		if le != nil {
			s.linear = append(s.linear, frame...)
			err = le.ProcessCaptureLinear(s.out[start:], s.linear[start:])
		} else {
			err = s.e.ProcessCapture(s.out[start:])
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("aec: capture: %w", err)
			}
			copy(s.out[start:], frame)
			if le != nil {
				copy(s.linear[start:], frame)
			}
		}
	}
	s.in = append(s.in[:0], s.in[done:]...)
	out = take(&s.out, len(near))
	if le != nil {
		linear = take(&s.linear, len(near))
	}
	return out, linear, first
}

// sanitize replaces samples that are not finite by silence.
func sanitize(x []float32) {
	for i, v := range x {
		if v != v || v > math.MaxFloat32 || v < -math.MaxFloat32 {
			x[i] = 0
		}
	}
}

// take returns the next n samples of buf and drops them from it; there are always
// enough (see Stream).
func take(buf *[]float32, n int) []float32 {
	res := make([]float32, n)
	copy(res, *buf)
	*buf = append((*buf)[:0], (*buf)[n:]...)
	return res
}

// SetDelay implements Canceller. The Stream's own buffering is not added: it delays
// render and capture audio alike by less than a frame on average.
func (s *Stream) SetDelay(d time.Duration) {
	if !s.closed {
		s.e.SetStreamDelay(d)
	}
}

// Latency implements Canceller: one engine frame plus the engine's own delay.
func (s *Stream) Latency() time.Duration {
	return audio.SamplesToDuration(int64(s.LatencySamples()), Rate)
}

// LatencySamples is Latency in samples.
func (s *Stream) LatencySamples() int {
	return s.n + int(audio.DurationToSamples(s.e.Latency(), Rate))
}

// Stats implements Canceller; after Close they are empty.
func (s *Stream) Stats() Stats {
	if s.closed {
		return Stats{}
	}
	return s.e.Stats()
}

// Close implements Canceller.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return s.e.Close()
}
