package replaytest

import (
	"context"
	"errors"
	"testing"

	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/pipeline/internal/pipetest"
)

// countingVoice gives a different sample for every synthesis, as espeak-ng's flutter
// does, and can stop part-way.
type countingVoice struct {
	calls  int
	stopAt int // a synthesis stops with an error after this many pieces (0: never)
}

func (c *countingVoice) SampleRate() int { return 16000 }

func (c *countingVoice) Synthesize(ctx context.Context, text string, emit func(tts.Piece) error) error {
	c.calls++
	for i := range 3 {
		if c.stopAt > 0 && i == c.stopAt {
			return errors.New("stopped")
		}
		if err := emit(tts.Piece{Samples: []float32{float32(c.calls), float32(i)}, Marks: []tts.Mark{{Sample: int64(i)}}}); err != nil {
			return err
		}
	}
	return nil
}

func TestSameVoice(t *testing.T) {
	say := func(e tts.Engine, text string) (pieces []tts.Piece, err error) {
		err = e.Synthesize(context.Background(), text, func(p tts.Piece) error {
			pieces = append(pieces, p)
			return nil
		})
		return pieces, err
	}
	engine := &countingVoice{stopAt: 2}
	memo := pipetest.NewSameVoice()
	// A synthesis stopped part-way is not kept.
	if _, err := say(memo.Wrap(engine), "hello"); err == nil {
		t.Fatal("the stopped synthesis returned no error")
	}
	engine.stopAt = 0
	first, err := say(memo.Wrap(engine), "hello")
	if err != nil || len(first) != 3 || first[0].Samples[0] != 2 {
		t.Fatalf("first whole synthesis: %v, %v", first, err)
	}
	first[0].Samples[0] = -1 // the receiver owns what it got
	again, err := say(memo.Wrap(engine), "hello")
	if err != nil || engine.calls != 2 || len(again) != 3 || again[0].Samples[0] != 2 || again[2].Marks[0].Sample != 2 {
		t.Fatalf("the same text again: %v, %v, %d calls", again, err, engine.calls)
	}
	if other, _ := say(memo.Wrap(engine), "other"); engine.calls != 3 || other[0].Samples[0] != 3 {
		t.Fatalf("another text: %v, %d calls", other, engine.calls)
	}
	// An emit error stops the kept audio too.
	stop := errors.New("barge-in")
	n := 0
	err = memo.Wrap(engine).Synthesize(context.Background(), "hello", func(tts.Piece) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Fatalf("emit error: %v after %d pieces", err, n)
	}
}
