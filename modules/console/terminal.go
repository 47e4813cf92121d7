package console

import (
	"fmt"
	"io"
	"sync"
)

// Terminal is the screen a live session shares between the conversation and the log:
// the conversation writes finished lines and redraws one line in progress (the user's
// partial words, the words of the agent heard so far), and log lines are printed above
// that line, which is drawn again after them. Without it a log line written while a
// partial line is on the screen would land in its middle.
//
// The conversation goes to out and log lines to logs (standard output and standard
// error: on a terminal both are the same screen). Live lines are drawn only when tty is
// set; otherwise each finished line is printed once. A Terminal is safe for concurrent
// use: the console module draws on it while any goroutine logs.
type Terminal struct {
	mu   sync.Mutex
	out  io.Writer
	logs io.Writer
	tty  bool
	live string // the line in progress on the screen ("" for none)
}

// NewTerminal returns a terminal writing the conversation to out and log lines to logs
// (out when nil); tty redraws the line in progress in place.
func NewTerminal(out, logs io.Writer, tty bool) *Terminal {
	if logs == nil {
		logs = out
	}
	return &Terminal{out: out, logs: logs, tty: tty}
}

// TTY reports whether the terminal redraws lines in place.
func (t *Terminal) TTY() bool { return t.tty }

// Out returns the conversation's writer, for output that never meets a line in progress
// (before or after a session).
func (t *Terminal) Out() io.Writer { return t.out }

// Logs returns the writer log lines go to, without the line-in-progress handling.
func (t *Terminal) Logs() io.Writer { return t.logs }

// clearLive takes the line in progress off the screen (t.mu held).
func (t *Terminal) clearLive() {
	if t.tty && t.live != "" {
		fmt.Fprint(t.out, "\r\x1b[K")
	}
}

// drawLive puts the line in progress back (t.mu held).
func (t *Terminal) drawLive() {
	if t.tty && t.live != "" {
		fmt.Fprint(t.out, t.live)
	}
}

// SetLive shows line as the line in progress ("" removes it). Only a terminal shows it.
func (t *Terminal) SetLive(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.tty || line == t.live {
		return
	}
	t.live = line
	fmt.Fprintf(t.out, "\r\x1b[K%s", line)
}

// Println prints a finished line of the conversation in place of the line in progress,
// which it ends.
func (t *Terminal) Println(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tty {
		fmt.Fprintf(t.out, "\r\x1b[K%s\n", line)
		t.live = ""
		return
	}
	fmt.Fprintln(t.out, line)
}

// Note prints a line (a message to the user, not part of the conversation) above the
// line in progress, which stays.
func (t *Terminal) Note(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clearLive()
	fmt.Fprintln(t.out, line)
	t.drawLive()
}

// ClearLive removes the line in progress from the screen (at the end of a session).
func (t *Terminal) ClearLive() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clearLive()
	t.live = ""
}

// LogWriter returns the writer log lines go through: each Write (zap writes one entry at
// a time) lands above the line in progress, which is redrawn after it.
func (t *Terminal) LogWriter() io.Writer { return logWriter{t} }

type logWriter struct{ t *Terminal }

func (w logWriter) Write(p []byte) (int, error) {
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clearLive()
	n, err := t.logs.Write(p)
	t.drawLive()
	return n, err
}
