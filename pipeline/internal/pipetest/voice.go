package pipetest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/tts/espeakng"
	"github.com/parley-voice/parley/pipeline"
)

// SameVoice makes replays that compare with each other hear the agent say the same text
// the same way. espeak-ng carries state from one synthesis to the next (its pitch
// flutter, engines/espeak), so each replay in a process otherwise hears a voicing of its
// own, set by every replay before it: rows of a table would differ by more than the
// sounds put over the agent, and a change that stores one sound differently would
// change the voicing of every later row. The first synthesis of each text is kept and
// given again. Another voicing, the same for every code: SpeakBefore first (a run
// repeated in the process with -count hears one too, but which depends on what the
// runs before it did).
type SameVoice struct {
	mu    sync.Mutex // each replay's speech module calls from a goroutine of its own
	texts map[string][]tts.Piece
}

// NewSameVoice returns an empty memo.
func NewSameVoice() *SameVoice { return &SameVoice{texts: map[string][]tts.Piece{}} }

// Wrap is a ReplayOptions.Voice.
func (v *SameVoice) Wrap(e tts.Engine) tts.Engine { return memoVoice{Engine: e, memo: v} }

func (v *SameVoice) get(text string) ([]tts.Piece, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	p, ok := v.texts[text]
	return p, ok
}

func (v *SameVoice) put(text string, pieces []tts.Piece) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.texts[text]; !ok {
		v.texts[text] = pieces
	}
}

// SpeakBefore has espeak-ng speak n sentences, moving on the state it keeps from one
// synthesis to the next: the speech after them has another voicing, the same in every
// process that does the same.
func SpeakBefore(t *testing.T, cfg pipeline.Config, n int) {
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
	memo *SameVoice
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
