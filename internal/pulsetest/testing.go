// Package pulsetest is the test helper over internal/pulseserver: New starts a private
// PulseAudio server for a test, points the test process at it and stops it when the test
// ends; Find and Onsets locate audio in what a test recorded.
package pulsetest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/pulseserver"
	"github.com/parley-voice/parley/internal/testenv"
)

// Server is a private server started for a test, with pulseserver.Server's methods and
// helpers that fail the test instead of returning an error.
type Server struct {
	*pulseserver.Server
}

// The server's types, under the names tests use.
type (
	Sink          = pulseserver.Sink
	SinkOptions   = pulseserver.SinkOptions
	Source        = pulseserver.Source
	Process       = pulseserver.Process
	RecordOptions = pulseserver.RecordOptions
)

// New starts a private server for t in t.TempDir(), points this process's PulseAudio
// clients (and so PortAudio) at it with t.Setenv, and stops it when the test ends. A
// missing pulseaudio skips the test, or fails it in CI. Because it sets the process
// environment, tests that use it cannot run in parallel.
func New(t testing.TB) *Server {
	t.Helper()
	srv, err := pulseserver.Start(context.Background(), shortTempDir(t))
	if errors.Is(err, pulseserver.ErrNotInstalled) {
		testenv.Missing(t, "pulseaudio", testenv.EnvFix)
	}
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{srv}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("pulseaudio log (last lines):\n%s", s.LogTail(40))
		}
	})
	for _, kv := range s.ClientEnv() {
		name, value, _ := strings.Cut(kv, "=")
		t.Setenv(name, value)
	}
	return s
}

// NullSink loads a null sink for t and fails the test if that does not work.
func (s *Server) NullSink(t testing.TB, name string, opts SinkOptions) Sink {
	t.Helper()
	sink, err := s.LoadNullSink(context.Background(), name, opts)
	if err != nil {
		t.Fatal(err)
	}
	return sink
}

// VirtualSource loads a virtual source for t (see LoadVirtualSource) and fails the test
// if that does not work.
func (s *Server) VirtualSource(t testing.TB, name, description, master string) Source {
	t.Helper()
	src, err := s.LoadVirtualSource(context.Background(), name, description, master)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// shortTempDir returns a temporary directory whose path leaves room for the socket
// name: t.TempDir() nests the test's name, which can be long.
func shortTempDir(t testing.TB) string {
	dir := t.TempDir()
	if len(dir) < 90 {
		return dir
	}
	short, err := os.MkdirTemp("", "pulse")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(short) })
	return short
}
