package llm

import "testing"

func TestHTTPEndpoints(t *testing.T) {
	tests := []struct {
		url, mode, endpoint, root string
	}{
		{"http://127.0.0.1:8080", ModeCompletions, "http://127.0.0.1:8080/v1/completions", "http://127.0.0.1:8080"},
		{"http://127.0.0.1:8080/", ModeChat, "http://127.0.0.1:8080/v1/chat/completions", "http://127.0.0.1:8080"},
		{"https://api.openai.com/v1", ModeChat, "https://api.openai.com/v1/chat/completions", "https://api.openai.com"},
		{"http://localhost:11434/v1/", ModeCompletions, "http://localhost:11434/v1/completions", "http://localhost:11434"},
		{"https://api.groq.com/openai/v1", ModeChat, "https://api.groq.com/openai/v1/chat/completions", "https://api.groq.com/openai"},
		{"http://h:1/v1/chat/completions", ModeChat, "http://h:1/v1/chat/completions", "http://h:1"},
		{"http://h:1/v1/completions", ModeCompletions, "http://h:1/v1/completions", "http://h:1"},
		{"http://h:1/proxy", ModeCompletions, "http://h:1/proxy/v1/completions", "http://h:1/proxy"},
	}
	for _, tc := range tests {
		ep, root, err := endpoints(tc.url, tc.mode)
		if err != nil || ep != tc.endpoint || root != tc.root {
			t.Errorf("endpoints(%q, %s) = %q, %q, %v; want %q, %q", tc.url, tc.mode, ep, root, err, tc.endpoint, tc.root)
		}
	}
	for _, bad := range []string{"", "localhost:8080", "ftp://h/", "http://", "://x"} {
		if _, _, err := endpoints(bad, ModeCompletions); err == nil {
			t.Errorf("endpoints(%q) accepted", bad)
		}
	}
	if _, err := NewHTTPEngine(HTTPConfig{URL: "http://h", Mode: "embeddings"}); err == nil {
		t.Error("unknown mode accepted")
	}
}
