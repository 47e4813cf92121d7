// Package regularfile refuses paths that are not regular files before anything opens,
// reads or writes them, and bounds what is read.
//
// Opening a FIFO for reading waits for a writer, and reading a device may never end: a model,
// WAV, config or scenario path that names one would hang the agent inside open(), where
// neither a context nor Ctrl-C reaches it. Every place that opens a file the user named
// checks it here first (C libraries that open the path themselves, through Check) or opens
// it here (Open). Text read whole (ReadFile, ReadAll) has a limit, and more than that is an
// error (*TooLargeError) instead of a process that runs out of memory. Every place that
// writes a path the user named does it here too (output.go): only regular files and new
// paths are written, never a device, a FIFO or a symbolic link's target.
package regularfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the errors of Check, CheckDir and Open when a path names
// something other than what was expected.
var ErrNotRegular = errors.New("not a regular file")

// Error says what a path is instead of a regular file (or directory, for CheckDir).
type Error struct {
	Path string
	// Mode is the type the path has (symbolic links are followed).
	Mode fs.FileMode
	// WantDir is set when a directory was expected.
	WantDir bool
	// Output is set when the path was to be written: it was left as it is.
	Output bool
}

func (e *Error) Error() string {
	want := "a regular file"
	if e.WantDir {
		want = "a directory"
	}
	if e.Output {
		return fmt.Sprintf("%s is %s, not a regular file: it is left as it is (write to a regular file or a new path)", e.Path, TypeName(e.Mode))
	}
	return fmt.Sprintf("%s is %s, not %s", e.Path, TypeName(e.Mode), want)
}

// Is makes errors.Is(err, ErrNotRegular) true.
func (e *Error) Is(target error) bool { return target == ErrNotRegular }

// TypeName names a file type with its article, the way people know it: "a FIFO", "a
// character device", ...
func TypeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	}
	return "a file of an unknown type"
}

// Check returns nil when path names a regular file (after following symbolic links), an
// *Error saying what it is otherwise, and Stat's error when it cannot be looked at.
func Check(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return &Error{Path: path, Mode: st.Mode().Type()}
	}
	return nil
}

// CheckDir returns nil when path names a directory whose entries are all regular files or
// directories: a model directory that a library reads file by file (pocketsphinx's
// acoustic models).
func CheckDir(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return &Error{Path: path, Mode: st.Mode().Type(), WantDir: true}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := path + string(os.PathSeparator) + e.Name()
		st, err := os.Stat(p)
		if err != nil {
			continue // a dangling link fails where the library opens it, without hanging
		}
		if !st.Mode().IsRegular() && !st.IsDir() {
			return &Error{Path: p, Mode: st.Mode().Type()}
		}
	}
	return nil
}

// Open opens a regular file for reading. It checks path first, and opens without waiting
// for a writer (O_NONBLOCK, which regular files ignore) so that a path swapped for a FIFO
// after the check is refused too instead of blocking.
func Open(path string) (*os.File, error) {
	if err := Check(path); err != nil {
		return nil, err
	}
	return openRegular(path)
}

// openRegular is Open after the check.
func openRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, &Error{Path: path, Mode: st.Mode().Type()}
	}
	return f, nil
}

// ReadFile is os.ReadFile for regular files only, of at most limit bytes: a larger file
// is a *TooLargeError.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, limit, path)
}
