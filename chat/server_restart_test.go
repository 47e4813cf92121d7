package chat

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
	"sync"
	"testing"

	"github.com/parley-voice/parley/modules/llm/llmtest"
)

// completionRecorder stands between the chat and a real llama-server: it forwards every
// request, keeps the prompt of every completion request, and runs onCompletion (with
// the request's number, from 1) as each arrives. A request it cannot forward (the
// server is down) is dropped, as the server's own connection would be.
type completionRecorder struct {
	upstream     *url.URL
	onCompletion func(n int)

	mu      sync.Mutex
	prompts []string
}

func (c *completionRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "completion") {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Prompt string `json:"prompt"`
		}
		json.Unmarshal(body, &req)
		c.mu.Lock()
		c.prompts = append(c.prompts, req.Prompt)
		n := len(c.prompts)
		c.mu.Unlock()
		c.onCompletion(n)
	}
	rp := httputil.NewSingleHostReverseProxy(c.upstream)
	rp.ErrorHandler = func(http.ResponseWriter, *http.Request, error) { panic(http.ErrAbortHandler) }
	rp.ServeHTTP(w, r)
}

func (c *completionRecorder) lastPrompt() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prompts[len(c.prompts)-1]
}

// TestChatAfterServerRestart: llama-server is killed as the chat's second reply is
// asked of it (nothing of that reply was generated), and restarted before the third
// line. The failure says that the user's line is kept and nothing of the reply; the
// next prompt has no two user turns in a row: the unanswered line goes with the next.
func TestChatAfterServerRestart(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	upstream, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // guards srv, which the recorder kills and the test restarts
	rec := &completionRecorder{upstream: upstream, onCompletion: func(n int) {
		if n == 2 {
			mu.Lock()
			srv.Kill()
			mu.Unlock()
		}
	}}
	proxy := httptest.NewServer(rec)
	defer proxy.Close()

	f := newChatFixture(t)
	f.cfg.LLM.Engine, f.cfg.LLM.URL = "http", proxy.URL
	c, store, out, errOut := newTestChat(t, f, false, nil)
	ctx := context.Background()

	if err := c.exchange(ctx, "Hello there"); err != nil {
		t.Fatal(err)
	}
	if err := c.exchange(ctx, "Tell me a story"); err != nil {
		t.Fatalf("the chat ended on a server failure: %v", err)
	}
	if !strings.Contains(errOut.String(), "the model failed before it wrote anything") || !strings.Contains(errOut.String(), "your line is kept and goes with your next one") ||
		strings.Contains(errOut.String(), "what it wrote is kept") {
		t.Fatalf("the failure's message:\n%s", errOut)
	}
	if !strings.Contains(out.String(), "Storyteller: [failed]\n") {
		t.Errorf("the output does not show the failed reply:\n%s", out)
	}
	mu.Lock()
	srv = llmtest.StartLlamaServer(t, srv.Port)
	mu.Unlock()
	if err := c.exchange(ctx, "Are you still there?"); err != nil {
		t.Fatal(err)
	}

	h, err := store.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describeUtts(h.Utterances()), "user 1, agent 2, user 3, user 5, agent 6"; got != want {
		t.Fatalf("history %q, want %q\n%s", got, want, out)
	}
	prompt := rec.lastPrompt()
	if !strings.Contains(prompt, "Child: Tell me a story Are you still there?\n") {
		t.Errorf("the unanswered line does not go with the next one:\n%s", prompt)
	}
	var roles []string
	for _, line := range strings.Split(prompt, "\n") {
		for _, role := range []string{"Child:", "Storyteller:"} {
			if strings.HasPrefix(line, role) {
				roles = append(roles, role)
			}
		}
	}
	for i := 1; i < len(roles); i++ {
		if roles[i] == "Child:" && roles[i-1] == "Child:" {
			t.Fatalf("two user turns in a row in the prompt after the restart:\n%s", prompt)
		}
	}
	if len(roles) != 4 || roles[len(roles)-1] != "Storyteller:" {
		t.Errorf("turns %q in the prompt:\n%s", roles, prompt)
	}
}
