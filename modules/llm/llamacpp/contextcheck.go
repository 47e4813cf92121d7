package llamacpp

import (
	"fmt"

	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/internal/meminfo"
	"github.com/parley-voice/parley/internal/regularfile"
)

// ContextError says why a context length cannot be used with a model: it is longer
// than the model was trained on, or its KV cache would not fit the memory available.
// Callers name the setting ("llm.context: ", "--ctx: ").
type ContextError struct {
	Tokens int
	// Train is the model's training context.
	Train int
	// PerToken is the estimated KV cache per token (bytes), Contexts how many such
	// contexts are made, Available the memory available (0 when not checked).
	PerToken  int64
	Contexts  int
	Available int64
	// Max is the longest context that would do.
	Max int
}

func (e *ContextError) Error() string {
	if e.Tokens > e.Train {
		return fmt.Sprintf("%d tokens is more than the model was trained on (want 1–%d, or 0 for %d)", e.Tokens, e.Train, min(e.Train, DefaultMaxContext))
	}
	need := e.PerToken * int64(e.Tokens) * int64(e.Contexts)
	contexts := ""
	if e.Contexts > 1 {
		contexts = fmt.Sprintf(" in each of %d contexts", e.Contexts)
	}
	return fmt.Sprintf("%d tokens need about %s of memory for the KV cache (%s per token%s), and %s is available (want at most %d)",
		e.Tokens, regularfile.FormatBytes(roundMiB(need)), regularfile.FormatBytes(e.PerToken), contexts, regularfile.FormatBytes(roundMiB(e.Available)), e.Max)
}

// roundMiB rounds a byte count to whole MiB (to KiB below one), for messages.
func roundMiB(n int64) int64 {
	if n >= 1<<20 {
		return (n + 1<<19) >> 20 << 20
	}
	return (n + 1<<9) >> 10 << 10
}

// CheckContext checks that contexts contexts of nCtx tokens (0: the default, the model's
// training context up to DefaultMaxContext) fit the model: not beyond its training
// context, and with KV caches (estimated from its shape) that fit the memory available
// now (/proc/meminfo's MemAvailable; not checked where it cannot be read).
func CheckContext(m *llama.Model, nCtx, contexts int) error {
	return checkContext(nCtx, contexts, m.ContextTrainSize(), m.Shape().KVBytesPerToken(), meminfo.Available)
}

func checkContext(nCtx, contexts, train int, perToken int64, available func() (int64, bool)) error {
	if nCtx == 0 {
		nCtx = min(train, DefaultMaxContext)
	}
	contexts = max(contexts, 1)
	if train > 0 && nCtx > train {
		return &ContextError{Tokens: nCtx, Train: train, Max: train}
	}
	avail, ok := available()
	if !ok || perToken <= 0 {
		return nil
	}
	if perToken*int64(nCtx)*int64(contexts) > avail {
		limit := avail / perToken / int64(contexts)
		if train > 0 {
			limit = min(limit, int64(train))
		}
		return &ContextError{Tokens: nCtx, Train: train, PerToken: perToken, Contexts: contexts, Available: avail, Max: int(limit)}
	}
	return nil
}
