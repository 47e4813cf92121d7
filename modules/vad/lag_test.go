package vad

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
)

// slowScorer takes delay to score each window and hears silence.
type slowScorer struct {
	delay   time.Duration
	pending int
}

func (s *slowScorer) WindowSize() int { return 512 }

func (s *slowScorer) Probs(chunk []float32) ([]float32, error) {
	s.pending += len(chunk)
	var out []float32
	for ; s.pending >= 512; s.pending -= 512 {
		time.Sleep(s.delay)
		out = append(out, 0)
	}
	return out, nil
}

func (s *slowScorer) Flush() ([]float32, error) { return nil, nil }
func (s *slowScorer) Reset()                    { s.pending = 0 }

// TestMaxLag: on the real clock the module reports how far it fell behind its input at
// worst — here at least the time one window takes to score.
func TestMaxLag(t *testing.T) {
	const delay = 40 * time.Millisecond
	m, err := New("vad", DefaultConfig(), &slowScorer{delay: delay})
	if err != nil {
		t.Fatal(err)
	}
	src := iu.ModuleFunc{ModuleName: "input", Fn: func(ctx context.Context, p *iu.Ports) error {
		for i := range 10 {
			f := audio.Frame{Rate: audio.PipelineRate, Channels: 1, Start: int64(i) * 320, Samples: make([]float32, 320)}
			u := p.NewIU(f)
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
		}
		return nil
	}}
	net := iu.NewNetwork()
	if err := net.Add(src, m); err != nil {
		t.Fatal(err)
	}
	if err := net.ConnectNames("input", "vad"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if lag := m.MaxLag(); lag < delay {
		t.Errorf("max lag %v, want at least one window's scoring (%v)", lag, delay)
	}
}
