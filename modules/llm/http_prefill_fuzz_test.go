package llm

import (
	"math"
	"testing"
)

// FuzzCompletionAnswer: whatever a server answers a prefill with, reading it never
// panics, and the estimate it gives is a probability range.
func FuzzCompletionAnswer(f *testing.F) {
	f.Add([]byte(`{"choices":[{"text":"?","logprobs":{"content":[{"token":"?","logprob":-0.5,"top_logprobs":[{"token":"?","logprob":-0.5},{"token":"\n","logprob":-2}]}]}}],"usage":{"prompt_tokens":12,"prompt_tokens_details":{"cached_tokens":11}},"timings":{"cache_n":11}}`))
	f.Add([]byte(`{"choices":[{"text":".","logprobs":{"tokens":["."],"top_logprobs":[{".":-0.2,"!":-3}]}}]}`))
	f.Add([]byte(`{"choices":[{"text":"?","logprobs":{"content":[{"top_logprobs":[{"token":"","logprob":1e308},{"token":"?","logprob":"NaN"}]}]}}]}`))
	f.Add([]byte(`{"error":{"message":"boom"}}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ans, err := parseCompletionAnswer(raw)
		if err != nil {
			return
		}
		p, pMax := endProbability(ans.top, []string{"\nUser:", ".", "?", "!", ""})
		if math.IsNaN(p) || math.IsNaN(pMax) || p < 0 || p > 1 || pMax < p || pMax > 1 {
			t.Fatalf("estimate %v–%v from %q", p, pMax, raw)
		}
	})
}
