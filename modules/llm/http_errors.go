package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/parley-voice/parley/internal/ellipsis"
)

// HTTPError is a non-success answer from the server.
type HTTPError struct {
	URL        string
	StatusCode int
	Message    string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("llm: %s answered %d %s: %s", e.URL, e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// transportError says why a request to url got no HTTP answer. Only a server that is not
// there (connection refused, a name that does not resolve, no route to the host) is
// "unreachable"; a server that takes too long is not, and neither is a broken
// connection or a TLS failure.
func (e *HTTPEngine) transportError(url string, err error) error {
	err = e.redactErr(err)
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.As(err, &dnsErr), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ENOENT):
		// ENOENT: a unix socket that is not there.
		return fmt.Errorf("%w: %s: %w", ErrUnreachable, url, err)
	case errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("%w within %v: %s: %w", ErrNoAnswer, e.cfg.ConnectTimeout, url, err)
	}
	return fmt.Errorf("llm: request to %s failed: %w", url, err)
}

// errorMessage extracts the message of an OpenAI-style error body
// ({"error":{"message":...}} or {"error":"..."}), or returns the body itself.
func errorMessage(body []byte) string {
	var withObject struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &withObject) == nil && withObject.Error.Message != "" {
		return withObject.Error.Message
	}
	var withString struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &withString) == nil && withString.Error != "" {
		return withString.Error
	}
	var object struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &object) == nil && object.Message != "" {
		return object.Message
	}
	return ellipsis.Cut(strings.TrimSpace(string(body)), 300)
}

// redact removes the API key from text that came from outside (an echoing server).
func (e *HTTPEngine) redact(s string) string {
	if e.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, e.apiKey, "[redacted]")
}

func (e *HTTPEngine) redactErr(err error) error {
	if e.apiKey == "" || !strings.Contains(err.Error(), e.apiKey) {
		return err
	}
	return errors.New(e.redact(err.Error()))
}

// Errors of the HTTP engine.
var (
	// ErrStreamBroken means the stream ended before the server said it was finished:
	// the server died or the connection was lost mid-generation.
	ErrStreamBroken = errors.New("llm: the server's stream ended before the generation finished")
	// ErrUnreachable means there is no server to talk to: the connection was refused,
	// the host name does not resolve, or no route leads to it.
	ErrUnreachable = errors.New("llm: server unreachable")
	// ErrNoAnswer means a connection was attempted or made but the server did not
	// complete it in time (a connect or TLS handshake timeout).
	ErrNoAnswer = errors.New("llm: no answer from the server")
	// ErrIdleTimeout means the server sent nothing for HTTPConfig.Timeout.
	ErrIdleTimeout = errors.New("llm: server sent nothing within the timeout")
)
