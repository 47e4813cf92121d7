package dialogue

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/internal/regularfile"
)

// SessionVersion is the session format this build writes and the newest it reads.
const SessionVersion = 1

// SessionFile is the name of a session's main file inside its directory.
const SessionFile = "session.json"

const maxSessionBytes = 64 << 20

// Session is what a saved conversation holds. A session directory has SessionFile and,
// optionally, one llama.cpp KV-state file that SessionFile names.
//
// Saving is crash-safe: every file is written to a temporary name in the directory,
// fsynced, renamed over the old one, and the directory is fsynced. A crash leaves either
// the previous session or the new one, never a mixture. A KV file gets a fresh name each
// time and SessionFile is written after it, so the session never names a half-written KV
// file. One process writes a directory at a time.
type Session struct {
	// Version is the session format (SessionVersion when written by this build).
	Version int         `json:"version"`
	SavedAt time.Time   `json:"saved_at,omitzero"`
	History *History    `json:"history"`
	Memory  MemoryState `json:"memory"`
	// KVFile names the KV-state file in the session directory ("" for none).
	KVFile string `json:"kv_file,omitempty"`
}

// Errors of saving and loading sessions.
var (
	ErrInvalidSession = errors.New("invalid session")
	ErrNewerSession   = errors.New("session written by a newer version of Parley")
	ErrUnsafePath     = errors.New("unsafe session path")
)

// KVWriter writes the model's KV state (for example with llama_state_save_file) to path,
// a temporary file inside the session directory.
type KVWriter func(path string) error

// KVBytes returns a KVWriter that writes b.
func KVBytes(b []byte) KVWriter {
	return func(path string) error { return os.WriteFile(path, b, 0o600) }
}

var kvNamePattern = regexp.MustCompile(`^kv-[A-Za-z0-9]{1,64}\.bin$`)

// MaxSessionNameLen is the longest session name.
const MaxSessionNameLen = 64

// ErrSessionName is wrapped by ValidSessionName's errors.
var ErrSessionName = errors.New("invalid session name")

// ValidSessionName accepts the names a session folder may have on every system: 1 to
// MaxSessionNameLen of the portable file name characters (A–Z, a–z, 0–9, '.', '_',
// '-'), not starting with '.' (hidden) or '-' (an option to other tools). Names are
// checked before a conversation starts, not at its first save.
func ValidSessionName(name string) error {
	const rule = "a session name is 1 to 64 of A–Z, a–z, 0–9, '.', '_' and '-', not starting with '.' or '-'"
	bad := func(why string) error { return fmt.Errorf("%w %q: %s (%s)", ErrSessionName, name, why, rule) }
	switch {
	case name == "":
		return bad("it is empty")
	case len(name) > MaxSessionNameLen:
		return bad(fmt.Sprintf("it is %d bytes long", len(name)))
	case name[0] == '.' || name[0] == '-':
		return bad(fmt.Sprintf("it starts with %q", name[0]))
	}
	for _, r := range name {
		portable := r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !portable {
			return bad(fmt.Sprintf("it holds %q", r))
		}
	}
	return nil
}

// SessionPath returns the directory of the session called name under base, refusing
// names ValidSessionName refuses (so none is hidden or leaves base: "../x", "a/b").
func SessionPath(base, name string) (string, error) {
	if err := ValidSessionName(name); err != nil {
		return "", fmt.Errorf("dialogue: %w: %w", ErrUnsafePath, err)
	}
	return filepath.Join(base, name), nil
}

// SaveSession writes s (with its KV state when kv is not nil) to dir, creating dir
// (mode 0700) if needed. Files are mode 0600. When kv is nil, the KV file the directory's
// current session names is kept.
func SaveSession(dir string, s Session, kv KVWriter) error {
	if s.History == nil {
		return fmt.Errorf("dialogue: save session: %w: no history", ErrInvalidSession)
	}
	if err := checkSessionDir(dir, true); err != nil {
		return fmt.Errorf("dialogue: save session: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("dialogue: save session: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("dialogue: save session: %w", err)
	}
	defer root.Close()

	s.Version = SessionVersion
	if s.SavedAt.IsZero() {
		s.SavedAt = time.Now().UTC()
	}
	if kv != nil {
		name, err := writeKV(root, dir, kv)
		if err != nil {
			return err
		}
		s.KVFile = name
	} else {
		s.KVFile = currentKVFile(root)
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("dialogue: save session: %w", err)
	}
	if err := writeFileAtomic(root, SessionFile, data); err != nil {
		return fmt.Errorf("dialogue: save session %s: %w", dir, err)
	}
	removeStale(root, s.KVFile)
	return nil
}

func tempName(final string) string { return ".tmp-" + rand.Text()[:16] + "-" + final }

// writeFileAtomic writes data to name inside root: temporary file, fsync, rename, fsync
// of the directory.
func writeFileAtomic(root *os.Root, name string, data []byte) error {
	if err := refuseNonRegular(root, name); err != nil {
		return err
	}
	tmp := tempName(name)
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return err
	}
	return syncDir(root)
}

// refuseNonRegular refuses to replace a symlink or anything but a regular file.
func refuseNonRegular(root *os.Root, name string) error {
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is %s, not a regular file", ErrUnsafePath, name, regularfile.TypeName(fi.Mode()))
	}
	return nil
}

func syncDir(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeKV(root *os.Root, dir string, kv KVWriter) (string, error) {
	name := "kv-" + rand.Text()[:20] + ".bin"
	tmp := tempName(name)
	if err := kv(filepath.Join(dir, tmp)); err != nil {
		_ = root.Remove(tmp)
		return "", fmt.Errorf("dialogue: save session: writing the KV state: %w", err)
	}
	err := func() error {
		fi, err := root.Lstat(tmp)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: the KV writer left a %v", ErrUnsafePath, fi.Mode().Type())
		}
		if err := root.Chmod(tmp, 0o600); err != nil {
			return err
		}
		f, err := root.OpenFile(tmp, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		err = f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		return root.Rename(tmp, name)
	}()
	if err != nil {
		_ = root.Remove(tmp)
		return "", fmt.Errorf("dialogue: save session: KV state: %w", err)
	}
	return name, nil
}

// currentKVFile returns the KV file the directory's session names, if it is there.
func currentKVFile(root *os.Root) string {
	data, err := readRegular(root, SessionFile)
	if err != nil {
		return ""
	}
	var head struct {
		KVFile string `json:"kv_file"`
	}
	if json.Unmarshal(data, &head) != nil || !kvNamePattern.MatchString(head.KVFile) {
		return ""
	}
	if fi, err := root.Lstat(head.KVFile); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return head.KVFile
}

// removeStale deletes KV files other than keep and temporary files of earlier writes that
// a crash left behind. Failures only cost disk space.
func removeStale(root *os.Root, keep string) {
	d, err := root.Open(".")
	if err != nil {
		return
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	for _, n := range names {
		if (kvNamePattern.MatchString(n) && n != keep) || strings.HasPrefix(n, ".tmp-") {
			_ = root.Remove(n)
		}
	}
}

// readRegular reads a regular file inside root, refusing symlinks.
func readRegular(root *os.Root, name string) ([]byte, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is %s, not a regular file", ErrUnsafePath, name, regularfile.TypeName(fi.Mode()))
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSessionBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSessionBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalidSession, name, maxSessionBytes)
	}
	return data, nil
}

// checkSessionDir refuses a session directory that is a symbolic link (or not a directory
// at all): os.OpenRoot would follow the link, and the session's files would be read and
// written wherever it points, as a symlinked session file would be. The folder holding
// the sessions may be a link (a user's data on another disk); a session's own folder
// may not. A directory that does not exist passes when it may be created.
func checkSessionDir(dir string, mayCreate bool) error {
	fi, err := os.Lstat(dir)
	switch {
	case mayCreate && errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%w: session folder %s is %s, not a directory", ErrUnsafePath, dir, regularfile.TypeName(fi.Mode()))
	}
	return nil
}

// LoadedSession is a session read from its directory.
type LoadedSession struct {
	Session
	// KVPath is the KV-state file's path, or "" when the session has none (or it is gone).
	KVPath string
}

// LoadSession reads the session in dir. Files must be regular files inside dir: symlinks
// and names that leave dir are refused.
func LoadSession(dir string) (LoadedSession, error) {
	if err := checkSessionDir(dir, false); err != nil {
		return LoadedSession{}, fmt.Errorf("dialogue: load session: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return LoadedSession{}, fmt.Errorf("dialogue: load session: %w", err)
	}
	defer root.Close()
	data, err := readRegular(root, SessionFile)
	if err != nil {
		return LoadedSession{}, fmt.Errorf("dialogue: load session %s: %w", dir, err)
	}
	s, err := ParseSession(data)
	if err != nil {
		return LoadedSession{}, fmt.Errorf("dialogue: load session %s: %w", dir, err)
	}
	out := LoadedSession{Session: s}
	if s.KVFile != "" {
		if fi, err := root.Lstat(s.KVFile); err == nil {
			if !fi.Mode().IsRegular() {
				return LoadedSession{}, fmt.Errorf("dialogue: load session %s: %w: %s is not a regular file", dir, ErrUnsafePath, s.KVFile)
			}
			out.KVPath = filepath.Join(dir, s.KVFile)
		}
	}
	return out, nil
}

// ParseSession reads and checks a session file's contents.
func ParseSession(data []byte) (Session, error) {
	if len(data) > maxSessionBytes {
		return Session{}, fmt.Errorf("%w: larger than %d bytes", ErrInvalidSession, maxSessionBytes)
	}
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Session{}, fmt.Errorf("%w: %w", ErrInvalidSession, err)
	}
	switch {
	case head.Version == nil || *head.Version < 1:
		return Session{}, fmt.Errorf("%w: no valid format version", ErrInvalidSession)
	case *head.Version > SessionVersion:
		return Session{}, fmt.Errorf("%w: it has session format %d, this build reads formats up to %d; upgrade Parley to open it",
			ErrNewerSession, *head.Version, SessionVersion)
	}
	var s Session
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&s); err != nil {
		return Session{}, fmt.Errorf("%w: %w", ErrInvalidSession, err)
	}
	if s.History == nil {
		return Session{}, fmt.Errorf("%w: no history", ErrInvalidSession)
	}
	if s.KVFile != "" && !kvNamePattern.MatchString(s.KVFile) {
		return Session{}, fmt.Errorf("%w: kv_file %q is not a KV file name of this directory", ErrUnsafePath, s.KVFile)
	}
	if s.Memory.Covered > s.History.Len() {
		return Session{}, fmt.Errorf("%w: the memory covers %d utterances of %d", ErrInvalidSession, s.Memory.Covered, s.History.Len())
	}
	if _, err := NewMemory(s.Memory, nopTokenizer{}); err != nil {
		return Session{}, fmt.Errorf("%w: %w", ErrInvalidSession, err)
	}
	return s, nil
}

// Restore returns the session's history and memory; tok is needed by summary-buffer
// memories.
func (s Session) Restore(tok Tokenizer) (*History, Memory, error) {
	if s.History == nil {
		return nil, nil, fmt.Errorf("dialogue: %w: no history", ErrInvalidSession)
	}
	mem, err := NewMemory(s.Memory, tok)
	if err != nil {
		return nil, nil, err
	}
	return s.History.Clone(), mem, nil
}

// nopTokenizer lets ParseSession check a summary-buffer state without a model.
type nopTokenizer struct{}

func (nopTokenizer) CountTokens(string) (int, error) { return 0, nil }

// SessionSummary describes a saved session for a listing.
type SessionSummary struct {
	// Name is the session's folder name (what --resume takes); Dir its path.
	Name, Dir string
	SavedAt   time.Time
	// Turns counts the stored utterances, the user's and the agent's.
	Turns int
	// Last is the last stored utterance (zero when there is none).
	Last Utterance
	// Err says why the session cannot be read (the other fields but Name and Dir are
	// then zero).
	Err error
}

// DescribeSession summarises the session saved in dir.
func DescribeSession(dir string) SessionSummary {
	sum := SessionSummary{Name: filepath.Base(dir), Dir: dir}
	loaded, err := LoadSession(dir)
	if err != nil {
		sum.Err = err
		return sum
	}
	sum.SavedAt = loaded.SavedAt
	utts := loaded.History.Utterances()
	sum.Turns = len(utts)
	if len(utts) > 0 {
		sum.Last = utts[len(utts)-1]
	}
	return sum
}

// ListSessions describes the sessions saved in base (each a folder holding SessionFile),
// oldest first; folders without a session file are not sessions and are left out. A base
// that does not exist holds no sessions.
func ListSessions(base string) ([]SessionSummary, error) {
	entries, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dialogue: list sessions: %w", err)
	}
	var out []SessionSummary
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		dir := filepath.Join(base, name)
		if _, err := os.Lstat(filepath.Join(dir, SessionFile)); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		out = append(out, DescribeSession(dir))
	}
	slices.SortStableFunc(out, func(a, b SessionSummary) int {
		if c := a.SavedAt.Compare(b.SavedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}
