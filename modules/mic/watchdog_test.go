package mic_test

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/pulsetest"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/mic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// startObservedMic is startMic with the network's log lines also kept in logs.
func startObservedMic(t *testing.T, cfg mic.Config) (*live, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	logger := zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), core))
	m, err := mic.New("mic", cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := &live{mic: m, frames: make(chan audio.Frame, 100000), done: make(chan struct{})}
	coll := collector(l.frames)
	net := iu.NewNetwork(iu.WithLogger(logger))
	if err := net.Add(m, coll); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(m, coll); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() {
		l.err = net.Run(ctx)
		close(l.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	return l, logs
}

const (
	stallWarning   = "no audio from the input device"
	startupWarning = "no audio from the input device since it opened"
	resumedInfo    = "input device delivers audio again"
)

// TestNoStallWarningAtStart: the monitor of PulseAudio's default null sink (rewinding,
// as module-always-sink's auto_null, which a server without sound cards plays into)
// delivers a new recording's first audio about two seconds after it starts. That is the
// sound server starting up, not a stalled device: the module used to warn "no audio from
// the input device" after one second at every live start.
func TestNoStallWarningAtStart(t *testing.T) {
	srv := pulsetest.New(t)
	sink := srv.NullSink(t, "auto_null", pulsetest.SinkOptions{Rewinds: true})
	if err := srv.SetDefaultSource(context.Background(), sink.Monitor); err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	l, logs := startObservedMic(t, mic.Config{Device: "pulse"})
	l.next(t, 10*time.Second)
	first := time.Since(opened)
	for range 50 { // a second of audio after the first
		l.next(t, 10*time.Second)
	}
	for _, msg := range []string{stallWarning, startupWarning} {
		if n := logs.FilterMessage(msg).Len(); n > 0 {
			t.Errorf("%q logged %d time(s); the first audio came %v after the start", msg, n, first)
		}
	}
	t.Logf("first audio %v after the start", first)
}

// TestStallWarning: a device that stops delivering once audio flowed is still reported
// after a second, and its return too; one that delivers nothing after it opened is
// reported after the startup grace.
func TestStallWarning(t *testing.T) {
	t.Run("stops after delivering", func(t *testing.T) {
		srv := pulsetest.New(t)
		ctx := context.Background()
		sink := srv.NullSink(t, "room", pulsetest.SinkOptions{})
		if err := srv.SetDefaultSource(ctx, sink.Monitor); err != nil {
			t.Fatal(err)
		}
		l, logs := startObservedMic(t, mic.Config{Device: "pulse"})
		l.next(t, 10*time.Second)
		if _, err := srv.Pactl(ctx, "suspend-sink", sink.Name, "1"); err != nil {
			t.Fatal(err)
		}
		waitLog(t, logs, stallWarning, 10*time.Second)
		if _, err := srv.Pactl(ctx, "suspend-sink", sink.Name, "0"); err != nil {
			t.Fatal(err)
		}
		waitLog(t, logs, resumedInfo, 10*time.Second)
	})
	t.Run("never delivers", func(t *testing.T) {
		srv := pulsetest.New(t)
		ctx := context.Background()
		sink := srv.NullSink(t, "room", pulsetest.SinkOptions{})
		if err := srv.SetDefaultSource(ctx, sink.Monitor); err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Pactl(ctx, "suspend-sink", sink.Name, "1"); err != nil {
			t.Fatal(err)
		}
		_, logs := startObservedMic(t, mic.Config{Device: "pulse", StartupGrace: 1500 * time.Millisecond})
		waitLog(t, logs, startupWarning, 10*time.Second)
	})
}

// waitLog waits until a line with message msg was logged.
func waitLog(t *testing.T, logs *observer.ObservedLogs, msg string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for logs.FilterMessage(msg).Len() == 0 {
		if time.Now().After(deadline) {
			var all []string
			for _, e := range logs.All() {
				all = append(all, e.Message)
			}
			t.Fatalf("%q not logged within %v; logged: %q", msg, limit, all)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
