package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSignalPolicy(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		sig        os.Signal
		at         time.Duration
		hasHandler bool
		want       signalAction
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"Ctrl-C twice", []step{
			{os.Interrupt, 0, false, stopGracefully},
			{os.Interrupt, time.Minute, false, exitNow},
		}},
		{"SIGTERM twice", []step{
			{syscall.SIGTERM, 0, false, stopGracefully},
			{syscall.SIGTERM, time.Millisecond, false, exitNow},
		}},
		{"SIGTERM then Ctrl-C", []step{
			{syscall.SIGTERM, 0, false, stopGracefully},
			{os.Interrupt, time.Second, true, exitNow},
		}},
		{"chat: each Ctrl-C stops a reply", []step{
			{os.Interrupt, 0, true, toHandler},
			{os.Interrupt, 5 * time.Second, true, toHandler},
			{os.Interrupt, 20 * time.Second, true, toHandler},
		}},
		{"chat: Ctrl-C twice in a row stops, a third quits", []step{
			{os.Interrupt, 0, true, toHandler},
			{os.Interrupt, 300 * time.Millisecond, true, stopGracefully},
			{os.Interrupt, 400 * time.Millisecond, true, exitNow},
		}},
		{"chat: SIGTERM is never the command's", []step{
			{syscall.SIGTERM, 0, true, stopGracefully},
			{os.Interrupt, time.Minute, true, exitNow},
		}},
		{"chat: Ctrl-C between replies stops", []step{
			{os.Interrupt, 0, true, toHandler},
			{os.Interrupt, time.Minute, false, stopGracefully},
			{syscall.SIGTERM, 2 * time.Minute, false, exitNow},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p signalPolicy
			for i, s := range tt.steps {
				if got := p.decide(s.sig, t0.Add(s.at), s.hasHandler); got != s.want {
					t.Fatalf("step %d (%v at %v, handler %v): %v, want %v", i, s.sig, s.at, s.hasHandler, got, s.want)
				}
			}
		})
	}
	if signalExitCode(os.Interrupt) != 130 || signalExitCode(syscall.SIGTERM) != 143 {
		t.Fatalf("exit codes %d, %d; want 130, 143", signalExitCode(os.Interrupt), signalExitCode(syscall.SIGTERM))
	}
}

// TestSecondSignalEndsTheProcess runs the agent blocked where no context reaches (reading
// a prompt from a standard input that never ends) and signals it: the first signal starts
// a graceful stop, which cannot finish; the second ends the process at once with the
// shell's status for the signal.
func TestSecondSignalEndsTheProcess(t *testing.T) {
	for _, tt := range []struct {
		name     string
		sig      syscall.Signal
		wantCode int
	}{
		{"Ctrl-C", syscall.SIGINT, 130},
		{"SIGTERM", syscall.SIGTERM, 143},
	} {
		t.Run(tt.name, func(t *testing.T) {
			stdin, writer, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer writer.Close() // held open: the agent's read never ends
			p := startAgent(t, userEnv(t, t.TempDir()), stdin, "generate", "--prompt", "-")
			stdin.Close()
			waitBlockedReading(t, p.cmd.Process.Pid)
			if err := p.cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			p.waitLine(t, "Ctrl-C again to quit at once", 30*time.Second)
			if err := p.cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t, 30*time.Second); code != tt.wantCode {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tt.wantCode, p.stderrText())
			}
		})
	}
}

// waitBlockedReading waits until a thread of process pid sleeps in a pipe read, which is
// where the agent waits for its prompt; until then a signal could arrive before main
// installed its handler. Kernels that do not name the wait fall back to a pause.
func waitBlockedReading(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "wchan"))
		for _, task := range tasks {
			if b, err := os.ReadFile(task); err == nil && strings.Contains(string(b), "pipe") {
				return
			}
		}
		if len(tasks) == 0 {
			break // no /proc here
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
}
