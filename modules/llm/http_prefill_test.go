package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// Prefills against scripted servers: the answers' two forms of log-probabilities, and
// servers that give none. A real llama-server is compared with the in-process engine in
// package llamacpp (TestHTTPPrefillMatchesInProcess).

func TestHTTPPrefill(t *testing.T) {
	ends := []string{"\nUser:", ".", "?", "!"}
	tests := []struct {
		name     string
		mode     string
		answer   string // the JSON answer; "" for none
		status   int
		wantNext float64
		wantMax  float64 // the most Next can be; wantNext when 0
		wantErr  error
		// requests is how many requests two prefills make.
		requests int32
		// maxLogprobs: the server answers 400 to a request for more log-probabilities.
		maxLogprobs float64
	}{
		{name: "llama-server's form", answer: `{"choices":[{"text":"?","logprobs":{"content":[{"token":"?","logprob":-0.5,
			"top_logprobs":[{"token":"?","logprob":-0.7},{"token":" and","logprob":-2},{"token":"\n","logprob":-2.5},{"token":"\n\n","logprob":-3}]}]}}],
			"usage":{"prompt_tokens":12,"prompt_tokens_details":{"cached_tokens":11}}}`,
			// "." and "!" are not listed: each may be as likely as "\n\n".
			wantNext: math.Exp(-0.7) + math.Exp(-2.5), wantMax: math.Exp(-0.7) + math.Exp(-2.5) + 2*math.Exp(-3), requests: 2},
		{name: "OpenAI's completions form", answer: `{"choices":[{"text":".","logprobs":{"tokens":["."],"token_logprobs":[-0.2],
			"top_logprobs":[{".":-0.2,"!":-3,"ly":-2.5}]}}],"usage":{"prompt_tokens":12}}`,
			// The list leaves less than two of its least likely tokens could hold.
			wantNext: math.Exp(-0.2) + math.Exp(-3), wantMax: 1 - math.Exp(-2.5), requests: 2},
		{name: "no probabilities in the answer", answer: `{"choices":[{"text":"?"}],"usage":{"prompt_tokens":12}}`,
			wantNext: -1, wantErr: llm.ErrNoPrefill, requests: 1},
		{name: "twenty probabilities refused, five given", maxLogprobs: 5,
			answer: `{"choices":[{"text":".","logprobs":{"tokens":["."],"token_logprobs":[-0.2],
			"top_logprobs":[{".":-0.2,"!":-3,"ly":-2.5}]}}],"usage":{"prompt_tokens":12}}`,
			wantNext: math.Exp(-0.2) + math.Exp(-3), wantMax: 1 - math.Exp(-2.5), requests: 3},
		{name: "no probabilities allowed", maxLogprobs: 2, wantNext: -1, wantErr: llm.ErrNoPrefill, requests: 2},
		{name: "prompt too long", status: http.StatusBadRequest,
			answer: `{"error":{"code":400,"message":"the request exceeds the available context size"}}`, wantNext: -1, requests: 2},
		{name: "server error", status: http.StatusInternalServerError, answer: `{"error":"boom"}`, wantNext: -1, requests: 2},
		{name: "malformed answer", answer: `{"choices":`, wantNext: -1, requests: 2},
		{name: "chat endpoint", mode: llm.ModeChat, wantNext: -1, wantErr: llm.ErrNoPrefill, requests: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int32
			srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				var body map[string]any
				if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
					t.Errorf("request body: %v", err)
				}
				first := requests.Load() == 1
				if body["max_tokens"] != 1.0 || body["stream"] != false || first && body["logprobs"] != 20.0 || !first && body["logprobs"] != 20.0 && body["logprobs"] != 5.0 ||
					body["prompt"] != "User: what time is it" {
					t.Errorf("request %v", body)
				}
				if n, _ := body["logprobs"].(float64); tt.maxLogprobs > 0 && n > tt.maxLogprobs {
					w.WriteHeader(http.StatusBadRequest)
					fmt.Fprintf(w, `{"error":{"message":"logprobs must be at most %g"}}`, tt.maxLogprobs)
					return
				}
				if tt.status != 0 {
					w.WriteHeader(tt.status)
				}
				w.Write([]byte(tt.answer))
			})
			e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL, Mode: tt.mode, ConnectRetries: -1})
			for i := range 2 {
				res, err := e.Prefill(context.Background(), "User: what time is it", ends)
				switch {
				case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
					t.Errorf("prefill %d: error %v, want %v", i, err, tt.wantErr)
				case tt.wantErr == nil && tt.wantNext < 0 && err == nil:
					t.Errorf("prefill %d: no error", i)
				case tt.wantErr == nil && tt.wantNext >= 0 && err != nil:
					t.Errorf("prefill %d: %v", i, err)
				}
				wantMax := tt.wantMax
				if wantMax == 0 {
					wantMax = tt.wantNext
				}
				if math.Abs(res.Next-tt.wantNext) > 1e-9 || math.Abs(res.NextMax-wantMax) > 1e-9 {
					t.Errorf("prefill %d: Next %.4f–%.4f, want %.4f–%.4f", i, res.Next, res.NextMax, tt.wantNext, wantMax)
				}
				if err == nil && (res.Tokens != 12 || res.Duration <= 0) {
					t.Errorf("prefill %d: %+v", i, res)
				}
			}
			if got := requests.Load(); got != tt.requests {
				t.Errorf("%d requests, want %d", got, tt.requests)
			}
		})
	}
}

// TestHTTPPrefillCancels: a prefill that the module cancels (the user spoke on, or a
// reply must start) returns at once with a cancellation, whatever the server does.
func TestHTTPPrefillCancels(t *testing.T) {
	release := make(chan struct{})
	srv := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.Prefill(ctx, "User: hello", []string{"."})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, llm.ErrNoPrefill) {
		t.Errorf("error %v, want the context's", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %v", d)
	}
}
