package regularfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Writing a path the user named must never destroy what is there: renaming a finished
// temporary file over the path replaces whatever it names, a device (/dev/null,
// /dev/full) or a FIFO included, and opening it with O_TRUNC follows a symbolic link and
// empties the file it points to. Every writer of a user's path goes through the
// functions below, which write only a regular file (never through a symbolic link) or a
// new path, and refuse anything else with an *Error; OpenStream, for the commands whose
// output is a stream, writes a FIFO or a character device in place instead.

// CheckOutput returns nil when path may be written: it does not exist, or it is a
// regular file that is not a symbolic link. Otherwise it returns an *Error (with Output
// set) saying what path is, or Lstat's error.
func CheckOutput(path string) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &Error{Path: path, Mode: st.Mode().Type(), Output: true}
	}
	return nil
}

// Create opens path for writing, emptying a regular file that is there or creating a new
// one with perm. Anything else (a symbolic link, a FIFO, a device, a directory) is
// refused with an *Error, before it is opened and again after: the file is opened
// without following a link and without waiting for a FIFO's reader, and only emptied once
// it is known to be a regular file.
func Create(path string, perm fs.FileMode) (*os.File, error) {
	f, err := openOutput(path, os.O_WRONLY|os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// OpenAppend opens path for appending (a log file), creating it with perm. Like Create
// it refuses what is not a regular file.
func OpenAppend(path string, perm fs.FileMode) (*os.File, error) {
	return openOutput(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, perm)
}

// openOutput opens path with flag (never following a link, never waiting for a
// FIFO's reader) and perm, and refuses it with an *Error, before it is opened and
// again after, unless it is a regular file or a new one.
func openOutput(path string, flag int, perm fs.FileMode) (*os.File, error) {
	if err := CheckOutput(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if err != nil {
		// Swapped for a link or a FIFO since the check: say what it is now.
		if cerr := CheckOutput(path); cerr != nil {
			return nil, cerr
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &Error{Path: path, Mode: st.Mode().Type(), Output: true}
	}
	return f, nil
}

// WriteFile writes data to path atomically (WriteAtomic).
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return WriteAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteAtomic writes path with write: into a temporary file in the same directory, which
// is synced, given perm and renamed over path only once complete, so that readers never
// see half a file and a failed write leaves the old one intact. Only a regular file or a
// new path is replaced: anything else is refused with an *Error, before the write and
// again just before the rename.
func WriteAtomic(path string, perm fs.FileMode, write func(w io.Writer) error) (err error) {
	if err := CheckOutput(path); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := CheckOutput(path); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// IsStream reports whether path names (after following symbolic links) a FIFO or a
// character device: what OpenStream writes in place.
func IsStream(path string) bool {
	st, err := os.Stat(path)
	return err == nil && isStreamMode(st.Mode())
}

func isStreamMode(m fs.FileMode) bool {
	return m&fs.ModeNamedPipe != 0 || (m&fs.ModeCharDevice != 0 && m&fs.ModeDevice != 0)
}

// OpenStream opens path for writing a stream. A FIFO or a character device (also through
// a symbolic link, as /dev/stdout is) is opened in place, never replaced: opening a FIFO
// waits for its reader, until ctx ends. A regular file or a new path is opened as Create
// does; anything else is refused with an *Error.
func OpenStream(ctx context.Context, path string, perm fs.FileMode) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil || !isStreamMode(st.Mode()) {
		return Create(path, perm)
	}
	if st.Mode()&fs.ModeNamedPipe == 0 {
		return os.OpenFile(path, os.O_WRONLY, 0)
	}
	type opened struct {
		f   *os.File
		err error
	}
	done := make(chan opened, 1)
	go func() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		done <- opened{f, err}
	}()
	select {
	case o := <-done:
		return o.f, o.err
	case <-ctx.Done():
		// Opening the FIFO for reading ends the writer's wait; both are closed again.
		if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer r.Close()
		}
		if o := <-done; o.f != nil {
			o.f.Close()
		}
		return nil, ctx.Err()
	}
}
