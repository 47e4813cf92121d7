package llm_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// TestHTTPEngineSaysUnreachableOnlyWhenItIs: a refused connection or a host name that
// does not resolve is "unreachable"; an HTTP error, a server that does not answer in
// time and a connection that breaks are each reported as what they are.
func TestHTTPEngineSaysUnreachableOnlyWhenItIs(t *testing.T) {
	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	// A server that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	// A server that hangs up at once.
	rude, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rude.Close()
	go func() {
		for {
			c, err := rude.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	failing := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"model exploded"}}`, http.StatusInternalServerError)
	})

	tests := []struct {
		name        string
		url         string
		want        error
		unreachable bool
		says        string
	}{
		{"refused", refused, llm.ErrUnreachable, true, "connection refused"},
		{"no such host", "http://parley-no-such-host.invalid:8080", llm.ErrUnreachable, true, "parley-no-such-host.invalid"},
		{"HTTP error", failing.URL, nil, false, "500 Internal Server Error: model exploded"},
		{"no answer", "http://" + silent.Addr().String(), llm.ErrIdleTimeout, false, "waiting for"},
		{"hangs up", "http://" + rude.Addr().String(), nil, false, "request to"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: tt.url, Timeout: 300 * time.Millisecond, ConnectRetries: -1})
			_, err := e.Generate(context.Background(), llm.Request{Prompt: "p", MaxTokens: 2}, func(string) error { return nil })
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			if errors.Is(err, llm.ErrUnreachable) != tt.unreachable || strings.Contains(err.Error(), "unreachable") != tt.unreachable {
				t.Errorf("error %q: says unreachable %v, want %v", err, !tt.unreachable, tt.unreachable)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not say %q", err, tt.says)
			}
			if _, err := e.ContextSize(context.Background()); tt.unreachable && !errors.Is(err, llm.ErrUnreachable) {
				t.Errorf("context size from an unreachable server: %v", err)
			}
		})
	}
}

// TestHTTPEngineContextSize: llama-server says its context size; a server without
// /props or /slots (the OpenAI API) says nothing, which is not an error.
func TestHTTPEngineContextSize(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	for _, url := range []string{srv.URL, srv.URL + "/v1", srv.URL + "/v1/completions"} {
		e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: url})
		if n, err := e.ContextSize(context.Background()); err != nil || n != 512 {
			t.Errorf("llama-server -c 512 at %s: context %d, %v", url, n, err)
		}
	}
	for _, tt := range []struct {
		name    string
		handler http.HandlerFunc
		want    int
	}{
		{"OpenAI API", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, 0},
		{"slots only", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/slots" {
				http.NotFound(w, r)
				return
			}
			fmt.Fprint(w, `[{"id":0,"n_ctx":2048},{"id":1,"n_ctx":2048}]`)
		}, 2048},
		{"props", func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/props" {
				http.NotFound(w, r)
				return
			}
			fmt.Fprint(w, `{"default_generation_settings":{"n_ctx":8192},"total_slots":1}`)
		}, 8192},
		{"HTML", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>hello</html>") }, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := scripted(t, tt.handler)
			e := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: fake.URL + "/v1"})
			if n, err := e.ContextSize(context.Background()); err != nil || n != tt.want {
				t.Errorf("context %d, %v; want %d", n, err, tt.want)
			}
		})
	}
}

// TestHTTPTokenizerWithoutTokenize: a server without /tokenize (the OpenAI API) gets its
// token counts estimated, never under the real count of llama-server's tokenizer (even
// stories260K's, whose 512-token vocabulary makes tokens short), and is asked only once.
func TestHTTPTokenizerWithoutTokenize(t *testing.T) {
	var asked atomic.Int32
	openAI := scripted(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/tokenize" {
			asked.Add(1)
		}
		http.NotFound(w, r)
	})
	srv := llmtest.StartLlamaServer(t, 0)
	real := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: srv.URL}).Tokenizer()
	estimated := llmtest.NewHTTPEngine(t, llm.HTTPConfig{URL: openAI.URL + "/v1"}).Tokenizer()
	for _, text := range []string{"", "Hello.", "Once upon a time, there was a little girl named Lily. She liked to play with her big red ball in the park.",
		strings.Repeat("The cat sat on the mat, and the dog barked at it. ", 20)} {
		want, err := real.CountTokens(text)
		if err != nil {
			t.Fatal(err)
		}
		got, err := estimated.CountTokens(text)
		if err != nil || got < want {
			t.Errorf("%q: estimated %d tokens (%v), llama-server counts %d", text, got, err, want)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("/tokenize asked %d times, want once", n)
	}
}
