package regularfile

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenDoesNotWaitForAWriter opens a FIFO past the check, as a path swapped for one
// between Check and open would be: O_NONBLOCK must keep open from waiting for a writer.
func TestOpenDoesNotWaitForAWriter(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := openRegular(fifo)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) || err.Error() != fifo+" is a FIFO, not a regular file" {
			t.Fatalf("openRegular(fifo) = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("openRegular(fifo) blocked in open()")
	}
}
