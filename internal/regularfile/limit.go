package regularfile

import (
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is wrapped by *TooLargeError.
var ErrTooLarge = errors.New("input too large")

// TooLargeError says that an input (a file, standard input) held more than its limit.
type TooLargeError struct {
	// What names the input: its path, or "standard input".
	What  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s, the limit for it", e.What, FormatBytes(e.Limit))
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ReadAll reads r to its end, or fails with a *TooLargeError naming what once more than
// limit bytes came.
func ReadAll(r io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{What: what, Limit: limit}
	}
	return data, nil
}

// LimitReader reads r until limit bytes were read, and then fails with a *TooLargeError
// naming what if r has more (io.LimitReader would end there as if r did).
func LimitReader(r io.Reader, limit int64, what string) io.Reader {
	return &limitedReader{r: r, left: limit, limit: limit, what: what}
}

type limitedReader struct {
	r     io.Reader
	left  int64
	limit int64
	what  string
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		// One byte more tells a reader that ends here from one that goes on.
		var one [1]byte
		n, err := l.r.Read(one[:])
		if n > 0 {
			return 0, &TooLargeError{What: l.what, Limit: l.limit}
		}
		return 0, err
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// FormatBytes writes a byte count the way limits are documented: "64 MiB", "1 KiB",
// "300 bytes".
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
