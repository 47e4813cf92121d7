package regularfile_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/parley-voice/parley/internal/regularfile"
)

// paths makes one path of each kind in a temporary directory.
func paths(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	p := map[string]string{
		"regular":      filepath.Join(dir, "model.bin"),
		"fifo":         filepath.Join(dir, "fifo.wav"),
		"dir":          filepath.Join(dir, "models"),
		"link to fifo": filepath.Join(dir, "link.wav"),
		"link to file": filepath.Join(dir, "link.bin"),
		"missing":      filepath.Join(dir, "missing.bin"),
		"device":       os.DevNull,
		"socket":       filepath.Join(dir, "s.sock"),
	}
	if err := os.WriteFile(p["regular"], []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p["fifo"], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p["dir"], 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p["fifo"], p["link to fifo"]); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(p["regular"], p["link to file"]); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", p["socket"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return p
}

func TestCheckAndOpen(t *testing.T) {
	p := paths(t)
	tests := []struct {
		kind    string
		wantMsg string // "" for success
		missing bool
	}{
		{kind: "regular"},
		{kind: "link to file"},
		{kind: "fifo", wantMsg: p["fifo"] + " is a FIFO, not a regular file"},
		{kind: "link to fifo", wantMsg: p["link to fifo"] + " is a FIFO, not a regular file"},
		{kind: "dir", wantMsg: p["dir"] + " is a directory, not a regular file"},
		{kind: "device", wantMsg: "/dev/null is a character device, not a regular file"},
		{kind: "socket", wantMsg: p["socket"] + " is a socket, not a regular file"},
		{kind: "missing", missing: true},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			path := p[tt.kind]
			check := func(name string, err error) {
				t.Helper()
				switch {
				case tt.missing:
					if !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("%s: %v, want a not-exist error", name, err)
					}
				case tt.wantMsg == "":
					if err != nil {
						t.Errorf("%s: %v", name, err)
					}
				default:
					if !errors.Is(err, regularfile.ErrNotRegular) || err.Error() != tt.wantMsg {
						t.Errorf("%s: %v, want %q wrapping ErrNotRegular", name, err, tt.wantMsg)
					}
				}
			}
			check("Check", regularfile.Check(path))
			f, err := regularfile.Open(path)
			check("Open", err)
			if err == nil {
				f.Close()
			}
			data, err := regularfile.ReadFile(path, 1<<20)
			check("ReadFile", err)
			if err == nil && string(data) != "data" {
				t.Errorf("ReadFile read %q", data)
			}
		})
	}
}

func TestCheckDir(t *testing.T) {
	p := paths(t)
	good := p["dir"]
	if err := os.WriteFile(filepath.Join(good, "mdef"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(good, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := regularfile.CheckDir(good); err != nil {
		t.Fatalf("CheckDir(model dir): %v", err)
	}
	// A directory holding a FIFO: the library would hang opening it.
	bad := filepath.Dir(p["fifo"])
	err := regularfile.CheckDir(bad)
	if !errors.Is(err, regularfile.ErrNotRegular) || !strings.Contains(err.Error(), "is a FIFO, not a regular file") {
		t.Fatalf("CheckDir(dir with a FIFO) = %v", err)
	}
	err = regularfile.CheckDir(p["regular"])
	if !errors.Is(err, regularfile.ErrNotRegular) || err.Error() != p["regular"]+" is a regular file, not a directory" {
		t.Fatalf("CheckDir(file) = %v", err)
	}
	if err := regularfile.CheckDir(p["fifo"]); !errors.Is(err, regularfile.ErrNotRegular) {
		t.Fatalf("CheckDir(fifo) = %v", err)
	}
}
