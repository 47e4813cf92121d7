package llamacpp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llamacpp"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// The HTTP engine against llama-server, compared with the in-process engine.

// TestHTTPEngineMatchesInProcess: greedy completions streamed from a real llama-server
// equal the in-process engine's on the same model.
func TestHTTPEngineMatchesInProcess(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL})
	local := newEngine(t, loadStories(t), llamacpp.Config{})
	for _, req := range []llm.Request{
		{Prompt: "Once upon a time", MaxTokens: 64},
		{Prompt: "The little dog", MaxTokens: 32},
		{Prompt: "Once upon a time", MaxTokens: 64}, // served from the server's prompt cache
	} {
		pieces, got := llmtest.Collect(t, e, req)
		_, want := llmtest.Collect(t, local, req)
		if got.Text != want.Text {
			t.Errorf("%q:\nserver:     %q\nin-process: %q", req.Prompt, got.Text, want.Text)
		}
		if got.Tokens != req.MaxTokens || got.StopReason != llm.StopLength || got.PromptTokens != want.PromptTokens {
			t.Errorf("%q: tokens %d, stop %q, prompt tokens %d (want %d, length, %d)", req.Prompt, got.Tokens, got.StopReason, got.PromptTokens, req.MaxTokens, want.PromptTokens)
		}
		if len(pieces) < 2 {
			t.Errorf("%q: %d pieces; the answer was not streamed", req.Prompt, len(pieces))
		}
		if got.TimeToFirstToken <= 0 || got.TimeToFirstToken > got.Duration || got.TokensPerSecond <= 0 {
			t.Errorf("metrics: ttft %v, duration %v, %.0f tokens/s", got.TimeToFirstToken, got.Duration, got.TokensPerSecond)
		}
	}
}

func TestHTTPEngineTokenizer(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL + "/v1/"})
	m := loadStories(t)
	for _, text := range []string{"", "Once upon a time", "Mr. Smith paid 3.5 dollars.\nUser: hi"} {
		got, err := e.Tokenizer().CountTokens(text)
		want, _ := m.CountTokens(text)
		if err != nil || got != want {
			t.Errorf("CountTokens(%q) = %d, %v; want %d", text, got, err, want)
		}
	}
}

// TestLlamaEngineTokensMatchLlamaServer compares token by token: llama-server's native
// /completion endpoint returns the ids of its greedy tokens, and the in-process engine
// must emit exactly their pieces, one piece per token.
func TestLlamaEngineTokensMatchLlamaServer(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	for _, prompt := range []string{"Once upon a time", "Tom and Sue found a big red ball in the garden. They"} {
		body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": 100, "temperature": 0, "return_tokens": true})
		resp, err := http.Post(srv.URL+"/completion", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Tokens  []llama.Token `json:"tokens"`
			Content string        `json:"content"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || len(out.Tokens) != 100 {
			t.Fatalf("llama-server answered %d tokens: %v", len(out.Tokens), err)
		}
		var want []string
		for _, tok := range out.Tokens {
			want = append(want, m.TokenToPiece(tok))
		}
		got, res := llmtest.Collect(t, e, llm.Request{Prompt: prompt, MaxTokens: 100})
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || res.Text != out.Content {
			t.Errorf("%q:\nengine pieces %q\nserver tokens %q", prompt, got, want)
		}
	}
}

// prefillHead and prefillEnds are the demo's prompt before the user's words and the
// ends its estimate sums.
const prefillHead = "A friendly storyteller talks with a child.\nChild:"

var prefillEnds = llm.TurnEnds("\nStoryteller:")

// prefillBoth prefills the user's words with the server and with the in-process engine.
func prefillBoth(t *testing.T, server, local llm.Prefiller, words string) (got, want llm.PrefillResult) {
	t.Helper()
	ctx, prompt := context.Background(), prefillHead+" "+words
	got, err := server.Prefill(ctx, prompt, prefillEnds)
	if err != nil {
		t.Fatalf("server prefill %q: %v", words, err)
	}
	if want, err = local.Prefill(ctx, prompt, prefillEnds); err != nil {
		t.Fatal(err)
	}
	return got, want
}

// TestHTTPPrefillMatchesInProcess: llama-server's token probabilities give the same
// estimate that the user's turn is complete as the in-process engine's logits, and the
// server keeps the prefilled prompt in its cache for the next, longer one.
func TestHTTPPrefillMatchesInProcess(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL})
	local := newEngine(t, loadStories(t), llamacpp.Config{})
	var last llm.PrefillResult
	for _, words := range []string{"what", "what time", "what time is it", "turn on the", "turn on the living room lamp"} {
		got, want := prefillBoth(t, e, local, words)
		t.Logf("%-30q server p=%.4f–%.4f (%d of %d tokens cached), in-process p=%.4f", words, got.Next, got.NextMax, got.Cached, got.Tokens, want.Next)
		// The server lists the twenty likeliest tokens: what it does not list lies
		// between Next and NextMax.
		if got.Next < 0 || got.Next > want.Next+1e-3 || got.NextMax < want.Next-1e-3 || got.NextMax-got.Next > 0.1 {
			t.Errorf("%q: the server's p=%.4f–%.4f, the in-process engine's %.4f", words, got.Next, got.NextMax, want.Next)
		}
		if want.NextMax != want.Next {
			t.Errorf("%q: the in-process engine's p=%.4f–%.4f; it sees every token", words, want.Next, want.NextMax)
		}
		if got.Tokens != want.Tokens {
			t.Errorf("%q: the server counted %d prompt tokens, the in-process engine %d", words, got.Tokens, want.Tokens)
		}
		if strings.HasPrefix(words, "what ") && got.Cached < last.Tokens-1 {
			t.Errorf("%q: %d tokens cached after a prefill of %d; the server did not keep the prompt", words, got.Cached, last.Tokens)
		}
		last = got
	}
	// Without ends the prompt is only evaluated (the closing, for the reply to come).
	got, err := e.Prefill(context.Background(), prefillHead+" what time is it\nStoryteller:", nil)
	if err != nil || got.Next != -1 || got.Cached == 0 {
		t.Errorf("closing prefill: %+v, %v; want Next -1 and the words cached", got, err)
	}
}

// TestHTTPPrefillWithFiveProbabilities: a server that gives at most five
// log-probabilities (OpenAI's completions; here llama-server behind a proxy that refuses
// more, as such a server does) is asked for five after its first refusal. Its estimate
// is a wider range that still holds the in-process engine's probability.
func TestHTTPPrefillWithFiveProbabilities(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	upstream := httputil.NewSingleHostReverseProxy(target)
	var refused atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req struct {
			Logprobs int `json:"logprobs"`
		}
		if json.Unmarshal(body, &req) == nil && req.Logprobs > 5 {
			refused.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":{"message":"logprobs must be at most 5","type":"invalid_request_error"}}`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		upstream.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)
	e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: proxy.URL})
	local := newEngine(t, loadStories(t), llamacpp.Config{})
	for _, words := range []string{"what time is it", "turn on the", "turn on the living room lamp"} {
		got, want := prefillBoth(t, e, local, words)
		t.Logf("%-30q server p=%.4f–%.4f from five tokens, in-process p=%.4f", words, got.Next, got.NextMax, want.Next)
		if got.Next < 0 || got.Next > want.Next+1e-3 || got.NextMax < want.Next-1e-3 {
			t.Errorf("%q: the server's p=%.4f–%.4f, the in-process engine's %.4f", words, got.Next, got.NextMax, want.Next)
		}
	}
	if n := refused.Load(); n != 1 {
		t.Errorf("%d requests for more than five refused, want 1 (the first)", n)
	}
}
