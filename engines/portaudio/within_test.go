package portaudio

import (
	"errors"
	"testing"
	"time"
)

// TestWithin: a call that returns in time gives its own result; one that does not gives
// ErrStuck at the deadline and goes on in the background.
func TestWithin(t *testing.T) {
	want := errors.New("its own error")
	if err := within(time.Second, func() error { return want }); err != want {
		t.Errorf("a call in time: %v, want %v", err, want)
	}
	release := make(chan struct{})
	defer close(release)
	began := time.Now()
	err := within(50*time.Millisecond, func() error { <-release; return nil })
	if !errors.Is(err, ErrStuck) || time.Since(began) > 5*time.Second {
		t.Errorf("a stuck call: %v after %v, want ErrStuck at 50ms", err, time.Since(began))
	}
}
