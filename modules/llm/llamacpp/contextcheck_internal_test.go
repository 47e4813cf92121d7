package llamacpp

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckContextRules: a context beyond the training context is refused with that
// limit; one whose KV caches exceed the memory available is refused with the longest
// that fits; the default context is checked like an explicit one; unknown memory or
// shape checks nothing more.
func TestCheckContextRules(t *testing.T) {
	avail := func(n int64, ok bool) func() (int64, bool) { return func() (int64, bool) { return n, ok } }
	for _, tt := range []struct {
		name      string
		nCtx      int
		contexts  int
		train     int
		perToken  int64
		available func() (int64, bool)
		want      string // "" for no error
		max       int
	}{
		{"fits", 2048, 1, 32768, 12288, avail(1<<30, true), "", 0},
		{"beyond training", 2000000000, 1, 32768, 12288, avail(1<<40, true), "2000000000 tokens is more than the model was trained on (want 1–32768, or 0 for 4096)", 32768},
		{"beyond memory", 32768, 1, 32768, 12288, avail(100<<20, true), "32768 tokens need about 384 MiB of memory for the KV cache (12 KiB per token), and 100 MiB is available (want at most 8533)", 8533},
		{"two contexts", 8192, 2, 32768, 12288, avail(100<<20, true), "8192 tokens need about 192 MiB of memory for the KV cache (12 KiB per token in each of 2 contexts), and 100 MiB is available (want at most 4266)", 4266},
		{"default beyond memory", 0, 1, 32768, 12288, avail(10<<20, true), "4096 tokens need about 48 MiB", 853},
		{"memory unknown", 32768, 1, 32768, 12288, avail(0, false), "", 0},
		{"shape unknown", 32768, 1, 32768, 0, avail(1, true), "", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkContext(tt.nCtx, tt.contexts, tt.train, tt.perToken, tt.available)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *ContextError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) || ce.Max != tt.max {
				t.Fatalf("%v (max %+v), want %q and at most %d", err, ce, tt.want, tt.max)
			}
		})
	}
}
