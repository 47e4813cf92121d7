package pipeline

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/tts/espeakng"
)

// sameVoice makes replays that compare with each other hear the agent say the same text
// the same way. espeak-ng carries state from one synthesis to the next (its pitch
// flutter, engines/espeak), so each replay in a process otherwise hears a voicing of its
// own, set by every replay before it: rows of a table would differ by more than the
// sounds put over the agent, and a change that stores one sound differently would
// change the voicing of every later row. The first synthesis of each text is kept and
// given again. Another voicing, the same for every code: speakBefore first (a run
// repeated in the process with -count hears one too, but which depends on what the
// runs before it did).
type sameVoice struct {
	mu    sync.Mutex // each replay's speech module calls from a goroutine of its own
	texts map[string][]tts.Piece
}

func newSameVoice() *sameVoice { return &sameVoice{texts: map[string][]tts.Piece{}} }

// wrap is a ReplayOptions.Voice.
func (v *sameVoice) wrap(e tts.Engine) tts.Engine { return memoVoice{Engine: e, memo: v} }

func (v *sameVoice) get(text string) ([]tts.Piece, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p, ok := v.texts[text]
	return p, ok
}

func (v *sameVoice) put(text string, pieces []tts.Piece) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.texts[text]; !ok {
		v.texts[text] = pieces
	}
}

// speakBefore has espeak-ng speak n sentences, moving on the state it keeps from one
// synthesis to the next: the speech after them has another voicing, the same in every
// process that does the same.
func speakBefore(t *testing.T, cfg Config, n int) {
	t.Helper()
	e, err := espeakng.New(cfg.TTS)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for range n {
		if err := e.Synthesize(context.Background(), "One more sentence before the table.", func(tts.Piece) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
}

type memoVoice struct {
	tts.Engine
	memo *sameVoice
}

// Synthesize gives the text's kept audio, piece by piece as the engine gave it, or
// synthesises it and keeps it when the synthesis was whole.
func (m memoVoice) Synthesize(ctx context.Context, text string, emit func(tts.Piece) error) error {
	if pieces, ok := m.memo.get(text); ok {
		for _, p := range pieces {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := emit(clonePiece(p)); err != nil {
				return err
			}
		}
		return nil
	}
	var kept []tts.Piece
	err := m.Engine.Synthesize(ctx, text, func(p tts.Piece) error {
		kept = append(kept, clonePiece(p))
		return emit(p)
	})
	if err == nil {
		m.memo.put(text, kept)
	}
	return err
}

// clonePiece copies p: a receiver owns a piece's samples.
func clonePiece(p tts.Piece) tts.Piece {
	return tts.Piece{Samples: slices.Clone(p.Samples), Marks: slices.Clone(p.Marks)}
}

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
	memo := newSameVoice()
	// A synthesis stopped part-way is not kept.
	if _, err := say(memo.wrap(engine), "hello"); err == nil {
		t.Fatal("the stopped synthesis returned no error")
	}
	engine.stopAt = 0
	first, err := say(memo.wrap(engine), "hello")
	if err != nil || len(first) != 3 || first[0].Samples[0] != 2 {
		t.Fatalf("first whole synthesis: %v, %v", first, err)
	}
	first[0].Samples[0] = -1 // the receiver owns what it got
	again, err := say(memo.wrap(engine), "hello")
	if err != nil || engine.calls != 2 || len(again) != 3 || again[0].Samples[0] != 2 || again[2].Marks[0].Sample != 2 {
		t.Fatalf("the same text again: %v, %v, %d calls", again, err, engine.calls)
	}
	if other, _ := say(memo.wrap(engine), "other"); engine.calls != 3 || other[0].Samples[0] != 3 {
		t.Fatalf("another text: %v, %d calls", other, engine.calls)
	}
	// An emit error stops the kept audio too.
	stop := errors.New("barge-in")
	n := 0
	err = memo.wrap(engine).Synthesize(context.Background(), "hello", func(tts.Piece) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 2 {
		t.Fatalf("emit error: %v after %d pieces", err, n)
	}
}
