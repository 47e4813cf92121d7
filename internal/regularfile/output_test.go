package regularfile_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/regularfile"
)

// identity is what must not change about a path a writer refused: its type and inode.
type identity struct {
	mode fs.FileMode
	ino  uint64
	data string // a regular file's contents
}

func identify(t *testing.T, path string) identity {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	id := identity{mode: st.Mode(), ino: st.Sys().(*syscall.Stat_t).Ino}
	if st.Mode().IsRegular() {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		id.data = string(b)
	}
	return id
}

// TestWritersLeaveWhatIsNotARegularFile: Create, OpenAppend, WriteFile and WriteAtomic
// write a regular file or a new path, and refuse a FIFO, a device, a directory, a
// socket and a symbolic link (to a regular file or to a FIFO) without changing it or
// what it points to.
func TestWritersLeaveWhatIsNotARegularFile(t *testing.T) {
	writers := map[string]func(path string) error{
		"Create": func(path string) error {
			f, err := regularfile.Create(path, 0o600)
			if err != nil {
				return err
			}
			_, err = f.WriteString("new")
			return errors.Join(err, f.Close())
		},
		"OpenAppend": func(path string) error {
			f, err := regularfile.OpenAppend(path, 0o600)
			if err != nil {
				return err
			}
			_, err = f.WriteString("new")
			return errors.Join(err, f.Close())
		},
		"WriteFile": func(path string) error { return regularfile.WriteFile(path, []byte("new"), 0o600) },
		"WriteAtomic": func(path string) error {
			return regularfile.WriteAtomic(path, 0o600, func(w io.Writer) error {
				_, err := io.WriteString(w, "new")
				return err
			})
		},
	}
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			p := paths(t)
			for _, kind := range []string{"fifo", "dir", "device", "socket", "link to file", "link to fifo"} {
				path := p[kind]
				before := identify(t, path)
				var target identity
				if strings.HasPrefix(kind, "link") {
					target = identify(t, mustReadlink(t, path))
				}
				err := write(path)
				want := path + " is " + map[string]string{"fifo": "a FIFO", "dir": "a directory", "device": "a character device",
					"socket": "a socket", "link to file": "a symbolic link", "link to fifo": "a symbolic link"}[kind] + ", not a regular file"
				if !errors.Is(err, regularfile.ErrNotRegular) || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %v, want an error saying %q", kind, err, want)
				}
				if after := identify(t, path); after != before {
					t.Errorf("%s: changed from %+v to %+v", kind, before, after)
				}
				if strings.HasPrefix(kind, "link") {
					if after := identify(t, mustReadlink(t, path)); after != target {
						t.Errorf("%s: its target changed from %+v to %+v", kind, target, after)
					}
				}
			}
			if err := write(p["regular"]); err != nil {
				t.Errorf("regular file: %v", err)
			}
			if err := write(p["missing"]); err != nil {
				t.Errorf("new path: %v", err)
			}
			for _, kind := range []string{"regular", "missing"} {
				b, err := os.ReadFile(p[kind])
				if want := map[bool]string{true: "datanew", false: "new"}[name == "OpenAppend" && kind == "regular"]; err != nil || string(b) != want {
					t.Errorf("%s after writing: %q, %v; want %q", kind, b, err, want)
				}
			}
			if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(p["regular"]), ".*.tmp")); len(matches) > 0 {
				t.Errorf("temporary files left behind: %q", matches)
			}
		})
	}
}

func mustReadlink(t *testing.T, path string) string {
	t.Helper()
	dst, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestOpenStream: a FIFO and a character device are written in place; /dev/full's
// writes fail (the device stays); a regular file or new path is created; a symbolic
// link to a regular file is refused.
func TestOpenStream(t *testing.T) {
	p := paths(t)
	ctx := context.Background()

	// A FIFO with a reader gets the bytes and stays a FIFO.
	before := identify(t, p["fifo"])
	got := make(chan string, 1)
	go func() {
		r, err := os.Open(p["fifo"])
		if err != nil {
			got <- err.Error()
			return
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	f, err := regularfile.OpenStream(ctx, p["link to fifo"], 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("streamed"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if s := <-got; s != "streamed" {
		t.Errorf("the FIFO's reader got %q", s)
	}
	if after := identify(t, p["fifo"]); after != before {
		t.Errorf("the FIFO changed from %+v to %+v", before, after)
	}

	for _, dev := range []string{os.DevNull, "/dev/full"} {
		before := identify(t, dev)
		f, err := regularfile.OpenStream(ctx, dev, 0o600)
		if err != nil {
			t.Fatalf("%s: %v", dev, err)
		}
		_, werr := f.WriteString("streamed")
		f.Close()
		if (dev == "/dev/full") != errors.Is(werr, syscall.ENOSPC) {
			t.Errorf("writing %s: %v", dev, werr)
		}
		if after := identify(t, dev); after != before {
			t.Errorf("%s changed from %+v to %+v", dev, before, after)
		}
	}

	if _, err := regularfile.OpenStream(ctx, p["link to file"], 0o600); !errors.Is(err, regularfile.ErrNotRegular) {
		t.Errorf("a link to a regular file: %v", err)
	}
	for _, kind := range []string{"regular", "missing"} {
		f, err := regularfile.OpenStream(ctx, p[kind], 0o600)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		f.WriteString("new")
		f.Close()
		if b, _ := os.ReadFile(p[kind]); string(b) != "new" {
			t.Errorf("%s holds %q", kind, b)
		}
	}
}

// TestOpenStreamWaitsForTheReaderUntilCancelled: a FIFO nobody reads is waited for, and
// the wait ends with the context.
func TestOpenStreamWaitsForTheReaderUntilCancelled(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "out.wav")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := regularfile.OpenStream(ctx, fifo, 0o600)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("OpenStream of a FIFO without a reader = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OpenStream did not end with its context")
	}
}

// TestReadLimits: ReadAll, ReadFile and LimitReader take up to the limit and refuse one
// byte more with a *TooLargeError that names the input and the limit.
func TestReadLimits(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := regularfile.ReadFile(path, 5); err != nil || string(b) != "12345" {
		t.Errorf("ReadFile at the limit: %q, %v", b, err)
	}
	_, err := regularfile.ReadFile(path, 4)
	if !errors.Is(err, regularfile.ErrTooLarge) || err.Error() != path+" is larger than 4 bytes, the limit for it" {
		t.Errorf("ReadFile past the limit: %v", err)
	}
	_, err = regularfile.ReadAll(strings.NewReader(strings.Repeat("x", 2<<20+1)), 2<<20, "standard input")
	if !errors.Is(err, regularfile.ErrTooLarge) || err.Error() != "standard input is larger than 2 MiB, the limit for it" {
		t.Errorf("ReadAll past the limit: %v", err)
	}
	if b, err := io.ReadAll(regularfile.LimitReader(strings.NewReader("abc"), 3, "t.tsv")); err != nil || string(b) != "abc" {
		t.Errorf("LimitReader at the limit: %q, %v", b, err)
	}
	if _, err := io.ReadAll(regularfile.LimitReader(strings.NewReader("abcd"), 3, "t.tsv")); !errors.Is(err, regularfile.ErrTooLarge) {
		t.Errorf("LimitReader past the limit: %v", err)
	}
	// An endless input (/dev/zero through standard input) ends at the limit.
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	if _, err := regularfile.ReadAll(zero, 1<<20, "standard input"); !errors.Is(err, regularfile.ErrTooLarge) {
		t.Errorf("ReadAll(/dev/zero): %v", err)
	}
}
