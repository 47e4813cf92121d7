package modelstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/parley-voice/parley/internal/regularfile"
)

// Errors of downloads.
var (
	// ErrChecksum is wrapped by errors about a file whose size or sha256 is not the
	// expected one.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrOffline is wrapped by errors of a download whose host could not be reached: its
	// name does not resolve, or no network route leads to it (this machine is offline,
	// or only reaches a local network).
	ErrOffline = errors.New("the model's host cannot be reached")
	// ErrRedirect is wrapped by errors of a download redirected where it must not go:
	// from https to plain http, or more than MaxRedirects times.
	ErrRedirect = errors.New("refused redirect")
)

// MaxRedirects is how many redirects a download follows (model hosts send one or two,
// to their content delivery network).
const MaxRedirects = 5

// Progress receives download progress: bytes done so far and the total (0 when unknown).
type Progress interface {
	Update(done, total int64)
	Done()
}

// Downloader fetches models into Dir.
type Downloader struct {
	Dir    string
	Client *http.Client
	// Retries is how many times a broken transfer is resumed before giving up.
	Retries int
	// RetryWait is the pause between attempts.
	RetryWait time.Duration
}

// Path returns where m lives in the downloader's directory.
func (d *Downloader) Path(m Model) string { return filepath.Join(d.Dir, m.File) }

// Pull makes sure m is present and verified in Dir, downloading what is missing. An
// interrupted download leaves FILE.part behind and the next Pull resumes it with an HTTP
// range request. The final file appears only after its sha256 matched (rename from .part).
func (d *Downloader) Pull(ctx context.Context, m Model, progress Progress) (string, error) {
	final := d.Path(m)
	if err := Verify(final, m); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(d.Dir, 0o755); err != nil {
		return "", fmt.Errorf("modelstore: %w", err)
	}
	part := final + ".part"
	// Only regular files are written and renamed over: a device, a FIFO or a symbolic
	// link in the models folder is left as it is.
	for _, p := range []string{final, part} {
		if err := regularfile.CheckOutput(p); err != nil {
			return "", fmt.Errorf("modelstore: %w", err)
		}
	}
	client := &http.Client{Timeout: 0} // large files: no overall timeout; ctx cancels
	if d.Client != nil {
		c := *d.Client
		client = &c
	}
	// Whatever the client, redirects stay on https and are few.
	client.CheckRedirect = checkRedirect
	var lastErr error
	for attempt := 0; attempt <= d.Retries; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(d.RetryWait):
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		lastErr = d.fetch(ctx, client, m, part, progress)
		if lastErr == nil {
			break
		}
		if ctx.Err() != nil || errors.Is(lastErr, ErrChecksum) || isPermanent(lastErr) {
			break
		}
	}
	if progress != nil {
		progress.Done()
	}
	if lastErr != nil {
		// A part that failed its checksum (or that a failed attempt emptied) is nothing
		// to resume: it goes, rather than wait on the disk for the next pull.
		if fi, err := os.Stat(part); err == nil && (errors.Is(lastErr, ErrChecksum) || fi.Size() == 0) {
			_ = os.Remove(part)
		}
		return "", lastErr
	}
	if err := regularfile.CheckOutput(final); err != nil {
		return "", fmt.Errorf("modelstore: %w", err)
	}
	if err := os.Rename(part, final); err != nil {
		return "", fmt.Errorf("modelstore: %w", err)
	}
	return final, nil
}

type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

func isPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) || errors.Is(err, ErrOffline) || errors.Is(err, ErrRedirect)
}

// checkRedirect is the download client's redirect policy: never from https to plain
// http (a model's bytes would then travel unauthenticated, and its checksum is all
// that would be left to catch a swap), and at most MaxRedirects of them.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("%w: more than %d redirects (a loop?), the last to %s", ErrRedirect, MaxRedirects, req.URL.Redacted())
	}
	if req.URL.Scheme != "https" && via[len(via)-1].URL.Scheme == "https" {
		return fmt.Errorf("%w: %s sent the download to %s, which is not https", ErrRedirect, via[len(via)-1].URL.Host, req.URL.Redacted())
	}
	return nil
}

// requestError says why a download request got no answer: the host cannot be reached
// (ErrOffline), a redirect was refused (ErrRedirect), or something else.
func requestError(m Model, err error) error {
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, ErrRedirect):
		return fmt.Errorf("modelstore: fetching %s: %w", m.Name, err)
	case errors.As(err, &dnsErr), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return fmt.Errorf("modelstore: fetching %s: %w: %w", m.Name, ErrOffline, err)
	}
	return fmt.Errorf("modelstore: fetching %s: %w", m.Name, err)
}

// fetch continues part from its current size and verifies the whole file at the end.
func (d *Downloader) fetch(ctx context.Context, client *http.Client, m Model, part string, progress Progress) error {
	f, err := os.OpenFile(part, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return permanentError{fmt.Errorf("modelstore: %w", err)}
	}
	defer f.Close()
	h := sha256.New()
	have, err := io.Copy(h, f) // re-hash what an earlier attempt left
	if err != nil {
		return fmt.Errorf("modelstore: reading %s: %w", part, err)
	}
	resumed := have > 0
	if m.Size > 0 && have > m.Size {
		// Longer than the real file: it cannot be a prefix of it.
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("modelstore: %w", err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("modelstore: %w", err)
		}
		h.Reset()
		have = 0
	}
	if m.Size == 0 || have < m.Size {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
		if err != nil {
			return permanentError{fmt.Errorf("modelstore: %w", err)}
		}
		if have > 0 {
			req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
		}
		resp, err := client.Do(req)
		if err != nil {
			return requestError(m, err)
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusPartialContent && have > 0:
		case resp.StatusCode == http.StatusOK:
			// The server ignored the range: start over.
			if have > 0 {
				if err := f.Truncate(0); err != nil {
					return fmt.Errorf("modelstore: %w", err)
				}
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					return fmt.Errorf("modelstore: %w", err)
				}
				h.Reset()
				have = 0
			}
		case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
			return restartPart(f, fmt.Errorf("modelstore: %s: server refused to resume at byte %d", m.Name, have))
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			return permanentError{fmt.Errorf("modelstore: fetching %s from %s: %s", m.Name, m.URL, resp.Status)}
		default:
			return fmt.Errorf("modelstore: fetching %s from %s: %s", m.Name, m.URL, resp.Status)
		}
		total := m.Size
		if total == 0 && resp.ContentLength > 0 {
			total = have + resp.ContentLength
		}
		w := &progressWriter{w: io.MultiWriter(f, h), done: have, total: total, progress: progress}
		if progress != nil {
			progress.Update(have, total)
		}
		if _, err := io.Copy(w, resp.Body); err != nil {
			return fmt.Errorf("modelstore: downloading %s (%d of %d bytes so far, will resume): %w", m.Name, w.done, total, err)
		}
		have = w.done
		if err := f.Sync(); err != nil {
			return fmt.Errorf("modelstore: %w", err)
		}
	}
	if err := check(m, have, h); err != nil {
		// A corrupt file must not be resumed; start from scratch next time.
		_ = f.Truncate(0)
		if resumed {
			// The bytes left by an earlier run may be what is wrong: worth one fresh try.
			// Not wrapping ErrChecksum keeps Pull's retry loop going.
			return fmt.Errorf("%v (after resuming a partial download; retrying from the start)", err)
		}
		return err
	}
	return nil
}

func restartPart(f *os.File, err error) error {
	if terr := f.Truncate(0); terr != nil {
		return fmt.Errorf("%w (and could not reset the partial file: %v)", err, terr)
	}
	return err
}

func check(m Model, size int64, h hash.Hash) error {
	if m.Size > 0 && size != m.Size {
		return fmt.Errorf("modelstore: %s: %w: size %d, want %d", m.Name, ErrChecksum, size, m.Size)
	}
	if m.SHA256 != "" {
		if got := hex.EncodeToString(h.Sum(nil)); got != m.SHA256 {
			return fmt.Errorf("modelstore: %s: %w: sha256 %s, want %s", m.Name, ErrChecksum, got, m.SHA256)
		}
	}
	return nil
}

// Verify checks that the file at path is m: its size and sha256.
func Verify(path string, m Model) error {
	f, err := regularfile.Open(path)
	if err != nil {
		return fmt.Errorf("modelstore: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("modelstore: %w", err)
	}
	if m.Size > 0 && st.Size() != m.Size {
		return fmt.Errorf("modelstore: %s: %w: size %d, want %d", path, ErrChecksum, st.Size(), m.Size)
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("modelstore: reading %s: %w", path, err)
	}
	return check(m, n, h)
}

type progressWriter struct {
	w        io.Writer
	done     int64
	total    int64
	progress Progress
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.done += int64(n)
	if p.progress != nil {
		p.progress.Update(p.done, p.total)
	}
	return n, err
}
