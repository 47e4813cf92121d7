package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// builtAgent is the agent binary that tests of whole-process behaviour (exit codes,
// signals, files that would block open()) run; built once, on first use.
var builtAgent struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtAgent.dir != "" {
		os.RemoveAll(builtAgent.dir)
	}
	os.Exit(code)
}

// agentBinary builds cmd/agent (once per test run) and returns its path.
func agentBinary(t *testing.T) string {
	t.Helper()
	testenv.Command(t, "go", testenv.EnvFix)
	builtAgent.once.Do(func() {
		builtAgent.dir, builtAgent.err = os.MkdirTemp("", "parley-agent-bin-")
		if builtAgent.err != nil {
			return
		}
		builtAgent.path = filepath.Join(builtAgent.dir, "agent")
		cmd := exec.Command("go", "build", "-o", builtAgent.path, ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			builtAgent.err = errors.New("go build ./cmd/agent: " + err.Error() + "\n" + string(out))
		}
	})
	if builtAgent.err != nil {
		t.Fatal(builtAgent.err)
	}
	return builtAgent.path
}

// userEnv is the environment of a user whose HOME is home and who set none of Parley's
// variables (the shared test assets stay reachable through PARLEY_SHARED), plus extra.
func userEnv(t *testing.T, home string, extra ...string) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "HOME", strings.HasPrefix(name, "XDG_"),
			strings.HasPrefix(name, "PARLEY_") && name != "PARLEY_SHARED":
			continue
		}
		env = append(env, kv)
	}
	if os.Getenv("PARLEY_SHARED") == "" {
		env = append(env, "PARLEY_SHARED="+filepath.Join(testenv.ModuleRoot(t), "..", "shared"))
	}
	return append(append(env, "HOME="+home), extra...)
}

// agentProcess is a running agent binary whose standard error is read line by line.
type agentProcess struct {
	cmd    *exec.Cmd
	stdout strings.Builder // written by exec's copier, read after the end
	lines  chan string     // standard error, closed at its end
	stderr strings.Builder
	mu     sync.Mutex
	done   chan struct{} // closed when the process has ended (its state is in cmd.ProcessState)
}

// startAgent starts the agent binary with env in the module root; stdin is what the
// process reads (nil: nothing).
func startAgent(t *testing.T, env []string, stdin *os.File, args ...string) *agentProcess {
	t.Helper()
	return startAgentIn(t, testenv.ModuleRoot(t), env, stdin, args...)
}

// startAgentIn is startAgent in the working directory dir.
func startAgentIn(t *testing.T, dir string, env []string, stdin *os.File, args ...string) *agentProcess {
	t.Helper()
	cmd := exec.Command(agentBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = stdin
	}
	p := &agentProcess{cmd: cmd, lines: make(chan string, 256), done: make(chan struct{})}
	cmd.Stdout = &p.stdout
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		close(p.lines)
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits up to limit for the process to end and returns its exit code; a process
// still running then is killed and fails the test: it hung.
func (p *agentProcess) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		// SIGQUIT makes the Go runtime print every goroutine's stack: where it hung.
		p.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		t.Fatalf("agent %s still running after %v: it hung; stderr (with the goroutines' stacks):\n%s",
			strings.Join(p.cmd.Args[1:], " "), limit, p.stderrText())
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *agentProcess) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// waitLine waits up to limit for a line of standard error containing want.
func (p *agentProcess) waitLine(t *testing.T, want string, limit time.Duration) {
	t.Helper()
	timeout := time.After(limit)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("agent ended without printing %q; stderr:\n%s", want, p.stderrText())
			}
			if strings.Contains(line, want) {
				return
			}
		case <-timeout:
			t.Fatalf("agent did not print %q within %v; stderr:\n%s", want, limit, p.stderrText())
		}
	}
}

// runAgentBinary runs the agent binary to its end (at most limit) and returns its exit
// code, standard output and standard error.
func runAgentBinary(t *testing.T, env []string, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	p := startAgent(t, env, nil, args...)
	code := p.wait(t, limit)
	return code, p.stdout.String(), p.stderrText()
}

// oneQuestion writes, into dir, a scenario of one recorded question and 3 s for the answer.
func oneQuestion(t *testing.T, dir, question string) string {
	t.Helper()
	scenario := filepath.Join(dir, "one.yaml")
	if err := os.WriteFile(scenario, []byte("tail: 3\nrecordings:\n  - file: "+question+"\n    at: 0.3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return scenario
}
