package modelstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fileServer serves one file with range support; breakAfter > 0 makes the first
// response stop after that many bytes, like a dropped connection.
type fileServer struct {
	data        []byte
	breakAfter  int
	ignoreRange bool

	mu       sync.Mutex
	requests []string // Range headers seen
}

func (s *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Header.Get("Range"))
	first := len(s.requests) == 1
	s.mu.Unlock()
	if r.URL.Path != "/models/test.bin" {
		http.NotFound(w, r)
		return
	}
	if s.ignoreRange {
		r.Header.Del("Range")
	}
	if first && s.breakAfter > 0 {
		w.Header().Set("Content-Length", itoa(len(s.data)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(s.data[:s.breakAfter])
		// Abort the connection mid-body.
		panic(http.ErrAbortHandler)
	}
	http.ServeContent(w, r, "test.bin", time.Unix(0, 0), bytes.NewReader(s.data))
}

func itoa(n int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + fmtInt(n)) }

func fmtInt(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func testModel(t *testing.T, url string, data []byte) Model {
	sum := sha256.Sum256(data)
	return Model{Name: "test", Kind: KindLLM, File: "test.bin", URL: url + "/models/test.bin",
		Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
}

type recordingProgress struct {
	updates int
	last    int64
	done    bool
}

func (p *recordingProgress) Update(done, total int64) { p.updates++; p.last = done }
func (p *recordingProgress) Done()                    { p.done = true }

func randomData(n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(1)).Read(b)
	return b
}

func TestPull(t *testing.T) {
	data := randomData(300_000)
	tests := []struct {
		name         string
		server       *fileServer
		partial      []byte // left in FILE.part before the pull
		mutate       func(*Model)
		wantErr      error
		wantErrText  string
		wantRequests int
		wantRange    string // Range header of the last request
	}{
		{name: "fresh", server: &fileServer{data: data}, wantRequests: 1},
		{name: "resume after a dropped connection", server: &fileServer{data: data, breakAfter: 100_000}, wantRequests: 2, wantRange: "bytes=100000-"},
		{name: "resume a part left by an earlier run", server: &fileServer{data: data}, partial: data[:123_456], wantRequests: 1, wantRange: "bytes=123456-"},
		{name: "server ignores ranges", server: &fileServer{data: data, ignoreRange: true}, partial: data[:5000], wantRequests: 1},
		{name: "part longer than the file", server: &fileServer{data: data}, partial: append(append([]byte{}, data...), 1, 2, 3), wantRequests: 1},
		{name: "corrupt part is retried from scratch", server: &fileServer{data: data}, partial: bytes.Repeat([]byte{7}, 999), wantRequests: 2, wantRange: ""},
		{name: "wrong checksum", server: &fileServer{data: data}, mutate: func(m *Model) { m.SHA256 = strings.Repeat("0", 64) }, wantErr: ErrChecksum, wantRequests: 1},
		{name: "not found", server: &fileServer{data: data}, mutate: func(m *Model) { m.URL += ".missing" }, wantErrText: "404", wantRequests: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.server)
			defer srv.Close()
			m := testModel(t, srv.URL, data)
			if tt.mutate != nil {
				tt.mutate(&m)
			}
			dir := t.TempDir()
			if tt.partial != nil {
				if err := os.WriteFile(filepath.Join(dir, m.File+".part"), tt.partial, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			d := &Downloader{Dir: dir, Retries: 2, RetryWait: time.Millisecond}
			var prog recordingProgress
			path, err := d.Pull(context.Background(), m, &prog)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Pull error %v, want %v", err, tt.wantErr)
				}
			case tt.wantErrText != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErrText) {
					t.Fatalf("Pull error %v, want one mentioning %q", err, tt.wantErrText)
				}
			case err != nil:
				t.Fatalf("Pull: %v", err)
			}
			if got := len(tt.server.requests); got != tt.wantRequests {
				t.Errorf("%d requests (ranges %q), want %d", got, tt.server.requests, tt.wantRequests)
			}
			if tt.wantRange != "" || tt.name == "corrupt part is retried from scratch" {
				if got := tt.server.requests[len(tt.server.requests)-1]; got != tt.wantRange {
					t.Errorf("last Range %q, want %q", got, tt.wantRange)
				}
			}
			final := filepath.Join(dir, m.File)
			if err != nil {
				if _, statErr := os.Stat(final); statErr == nil {
					t.Error("a failed pull left the final file in place")
				}
				return
			}
			got, _ := os.ReadFile(path)
			if !bytes.Equal(got, data) {
				t.Fatal("downloaded file differs from the served one")
			}
			if _, err := os.Stat(final + ".part"); !os.IsNotExist(err) {
				t.Error(".part file left behind after success")
			}
			if !prog.done || prog.last != int64(len(data)) {
				t.Errorf("progress: %+v, want done at %d bytes", prog, len(data))
			}
		})
	}
}

func TestPullSkipsVerifiedFile(t *testing.T) {
	data := randomData(1000)
	srv := httptest.NewServer(&fileServer{data: data})
	defer srv.Close()
	m := testModel(t, srv.URL, data)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, m.File), data, 0o644); err != nil {
		t.Fatal(err)
	}
	d := &Downloader{Dir: dir}
	if _, err := d.Pull(context.Background(), m, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Config.Handler.(*fileServer).requests); n != 0 {
		t.Fatalf("%d requests for a file already present and verified", n)
	}
}

// TestPullLeavesWhatIsNotARegularFile: a model's path (or its .part) that is a FIFO, a
// symbolic link or a directory is refused before anything is downloaded, and left as
// it was; the file a link points to is not touched.
func TestPullLeavesWhatIsNotARegularFile(t *testing.T) {
	data := randomData(1000)
	srv := httptest.NewServer(&fileServer{data: data})
	defer srv.Close()
	m := testModel(t, srv.URL, data)
	for _, tt := range []struct {
		name string
		make func(t *testing.T, path string)
		what string
	}{
		{"FIFO", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "a FIFO"},
		{"link to a stale file", func(t *testing.T, path string) {
			stale := filepath.Join(filepath.Dir(path), "elsewhere.bin")
			if err := os.WriteFile(stale, []byte("stale"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(stale, path); err != nil {
				t.Fatal(err)
			}
		}, "a symbolic link"},
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "a directory"},
	} {
		for _, suffix := range []string{"", ".part"} {
			t.Run(tt.name+suffix, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, m.File) + suffix
				tt.make(t, path)
				before, _ := os.Lstat(path)
				_, err := (&Downloader{Dir: dir}).Pull(context.Background(), m, nil)
				if err == nil || !strings.Contains(err.Error(), path+" is "+tt.what+", not a regular file") {
					t.Fatalf("Pull: %v", err)
				}
				if after, err := os.Lstat(path); err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
					t.Errorf("%s changed", path)
				}
				if b, err := os.ReadFile(filepath.Join(dir, "elsewhere.bin")); err == nil && string(b) != "stale" {
					t.Errorf("the link's target was written: %d bytes", len(b))
				}
			})
		}
	}
}

func TestVerify(t *testing.T) {
	data := randomData(5000)
	m := testModel(t, "http://unused", data)
	path := filepath.Join(t.TempDir(), "f")
	if err := Verify(path, m); err == nil {
		t.Error("Verify of a missing file: want error")
	}
	if err := os.WriteFile(path, data[:4999], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Verify(path, m); !errors.Is(err, ErrChecksum) {
		t.Errorf("short file: %v, want ErrChecksum", err)
	}
	flipped := append([]byte{}, data...)
	flipped[10] ^= 1
	if err := os.WriteFile(path, flipped, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Verify(path, m); !errors.Is(err, ErrChecksum) {
		t.Errorf("flipped bit: %v, want ErrChecksum", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Verify(path, m); err != nil {
		t.Errorf("good file: %v", err)
	}
}

func TestCatalog(t *testing.T) {
	c := Builtin()
	seen := map[string]bool{}
	for _, m := range c {
		if seen[m.Name] {
			t.Errorf("duplicate model %s", m.Name)
		}
		seen[m.Name] = true
		if len(m.SHA256) != 64 || m.Size <= 0 || !strings.HasPrefix(m.URL, "https://") || m.File == "" {
			t.Errorf("model %s is missing its url, size or sha256: %+v", m.Name, m)
		}
	}
	for _, k := range []Kind{KindASR, KindLLM, KindVAD} {
		if _, ok := c.Default(k); !ok {
			t.Errorf("no default %s model", k)
		}
	}
	if _, err := c.Find("nope"); err == nil || !strings.Contains(err.Error(), "whisper-base.en") {
		t.Errorf("Find of an unknown name should list the known ones: %v", err)
	}
	mirrored := c.WithMirror("http://127.0.0.1:9/")
	if got := mirrored[0].URL; got != "http://127.0.0.1:9/ggerganov/whisper.cpp/resolve/main/ggml-base.en.bin" {
		t.Errorf("mirrored URL %q", got)
	}
}

func TestBarOutput(t *testing.T) {
	var buf bytes.Buffer
	b := NewBar(&buf, "model", true)
	clock := time.Unix(0, 0)
	b.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	for done := int64(0); done <= 1000; done += 50 {
		b.Update(done, 1000)
	}
	b.Done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 11 {
		t.Fatalf("plain bar printed %d lines, want one per 10%%:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[10], "100%") || !strings.Contains(lines[5], " 50%") {
		t.Errorf("unexpected bar lines:\n%s", buf.String())
	}
}
