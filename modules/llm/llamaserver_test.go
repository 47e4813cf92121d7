package llm

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// llamaServer is a real llama-server process serving stories260K for a test.
type llamaServer struct {
	URL  string
	Port int
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited
	log  string
}

// freePort asks the kernel for a free TCP port on the loopback interface.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startLlamaServer starts llama-server on port (0: a free one), waits until /health
// answers, and kills it when the test ends.
func startLlamaServer(t testing.TB, port int) *llamaServer {
	t.Helper()
	bin := testenv.Command(t, "llama-server", testenv.EnvFix)
	model := storiesPath(t)
	if port == 0 {
		port = freePort(t)
	}
	logPath := filepath.Join(t.TempDir(), "llama-server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-m", model, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"-c", "512", "-np", "1", "-t", "1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start llama-server: %v", err)
	}
	s := &llamaServer{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Port: port, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() {
		cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	t.Cleanup(s.Kill)
	if err := s.waitHealthy(30 * time.Second); err != nil {
		s.Kill()
		data, _ := os.ReadFile(logPath)
		t.Fatalf("llama-server on port %d: %v\n%s", port, err, tail(string(data), 3000))
	}
	return s
}

func (s *llamaServer) waitHealthy(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("exited before it was healthy")
		case <-ctx.Done():
			return fmt.Errorf("not healthy after %v", limit)
		case <-tick.C:
		}
	}
}

// Kill stops the server at once (SIGKILL, as a crash would) and waits for it.
func (s *llamaServer) Kill() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Kill()
	<-s.done
}
