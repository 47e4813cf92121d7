// Package logging builds Parley's zap loggers: human-readable lines on the console and
// JSON lines in a log file, with a level per module that users can set.
package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/parley-voice/parley/internal/regularfile"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config says where logs go and how much of them.
type Config struct {
	// Level is the default level: debug, info, warn or error ("info" when empty).
	Level string `yaml:"level" json:"level"`
	// Modules overrides the level per logger name; a name also covers its children
	// ("asr" covers "asr.whisper").
	Modules map[string]string `yaml:"modules" json:"modules"`
	// File receives every entry at or above the levels as JSON lines; empty means none.
	File string `yaml:"file" json:"file"`
	// Quiet turns the console output off (the file still gets everything).
	Quiet bool `yaml:"quiet" json:"quiet"`
}

// ParseModuleLevels parses "asr=debug,llm=warn" into a module map.
func ParseModuleLevels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, lvl, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("logging: %q is not module=level", part)
		}
		if _, err := zapcore.ParseLevel(lvl); err != nil {
			return nil, fmt.Errorf("logging: module %s: %w", name, err)
		}
		out[name] = lvl
	}
	return out, nil
}

// New builds a logger from cfg, writing the console part to console (os.Stderr when
// nil). The returned function flushes and closes the log file.
func New(cfg Config, console io.Writer) (*zap.Logger, func() error, error) {
	levels, err := newLevels(cfg)
	if err != nil {
		return nil, nil, err
	}
	if console == nil {
		console = os.Stderr
	}
	var cores []zapcore.Core
	if !cfg.Quiet {
		enc := zap.NewDevelopmentEncoderConfig()
		enc.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		cores = append(cores, zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.AddSync(&lockedWriter{w: console}), zapcore.DebugLevel))
	}
	closeFile := func() error { return nil }
	if cfg.File != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.File), 0o755); err != nil {
			return nil, nil, fmt.Errorf("logging: %w", err)
		}
		f, err := openLogFile(cfg.File)
		if err != nil {
			return nil, nil, fmt.Errorf("logging: %w", err)
		}
		enc := zap.NewProductionEncoderConfig()
		enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
		cores = append(cores, zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(f), zapcore.DebugLevel))
		closeFile = func() error { _ = f.Sync(); return f.Close() }
	}
	core := &moduleLevelCore{Core: zapcore.NewTee(cores...), levels: levels}
	logger := zap.New(core, zap.AddCaller())
	return logger, func() error { _ = logger.Sync(); return closeFile() }, nil
}

type levels struct {
	def     zapcore.Level
	names   []string // longest first, so the most specific override wins
	byName  map[string]zapcore.Level
	minimum zapcore.Level
}

// Validate reports a level (default or per module) that is not one of debug, info,
// warn, error (or zap's dpanic, panic, fatal).
func (c Config) Validate() error {
	_, err := newLevels(c)
	return err
}

func newLevels(cfg Config) (*levels, error) {
	l := &levels{def: zapcore.InfoLevel, byName: map[string]zapcore.Level{}}
	if cfg.Level != "" {
		lvl, err := zapcore.ParseLevel(cfg.Level)
		if err != nil {
			return nil, fmt.Errorf("logging: level: %w", err)
		}
		l.def = lvl
	}
	l.minimum = l.def
	for name, s := range cfg.Modules {
		lvl, err := zapcore.ParseLevel(s)
		if err != nil {
			return nil, fmt.Errorf("logging: module %s: %w", name, err)
		}
		l.byName[name] = lvl
		l.names = append(l.names, name)
		if lvl < l.minimum {
			l.minimum = lvl
		}
	}
	sort.Slice(l.names, func(i, j int) bool { return len(l.names[i]) > len(l.names[j]) })
	return l, nil
}

func (l *levels) forName(name string) zapcore.Level {
	for _, n := range l.names {
		if name == n || strings.HasPrefix(name, n+".") {
			return l.byName[n]
		}
	}
	return l.def
}

// moduleLevelCore filters entries by the level of the logger's name.
type moduleLevelCore struct {
	zapcore.Core
	levels *levels
}

func (c *moduleLevelCore) Enabled(lvl zapcore.Level) bool { return lvl >= c.levels.minimum }

func (c *moduleLevelCore) With(fields []zapcore.Field) zapcore.Core {
	return &moduleLevelCore{Core: c.Core.With(fields), levels: c.levels}
}

func (c *moduleLevelCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level < c.levels.forName(e.LoggerName) {
		return ce
	}
	return c.Core.Check(e, ce)
}

// lockedWriter serialises console writes; zap may write from many goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// openLogFile opens the log file for appending: a regular file (created when missing),
// or a FIFO or a character device (/dev/stderr) written in place. A FIFO nobody reads is
// an error rather than a wait; a symbolic link to a regular file, a directory or a socket
// is refused and left as it is.
func openLogFile(path string) (*os.File, error) {
	if !regularfile.IsStream(path) {
		return regularfile.OpenAppend(path, 0o600)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENXIO) {
		return nil, fmt.Errorf("%s is a FIFO that nobody reads", path)
	}
	return f, err
}
