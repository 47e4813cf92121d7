// Package shapemodels provides models with the exact shape of Parley's real defaults and
// random weights, for timing only (issue 11). scripts/shape-models writes them into a cache
// outside the repository, deterministically; this package runs that script and reports the
// paths, so benchmarks and tests never hard-code where the files live.
//
// The files cost what the real models cost to run and say nothing about accuracy: the LLMs
// emit random tokens and the whisper shapes transcribe everything as empty text.
package shapemodels

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Built-in shapes; `scripts/shape-models --list` prints their dimensions.
const (
	// Qwen25_05B has Qwen2.5-0.5B-Instruct's dimensions and vocabulary size (151,936: the
	// Llama-2 tokenizer padded with made-up tokens) and, like it, a tied output layer.
	Qwen25_05B = "qwen2.5-0.5b"
	// Qwen25_05BVocab32k is the same with only the 32,000-token Llama-2 vocabulary, so its
	// output layer, and each generated token, is cheaper than the real model's.
	Qwen25_05BVocab32k = "qwen2.5-0.5b-v32k"
	// TinyLlama11B has TinyLlama-1.1B's dimensions, which use the Llama-2 tokenizer itself.
	TinyLlama11B = "tinyllama-1.1b"

	// The whisper shapes hold every tensor of the real ggml-*.en.bin files, as random F16
	// data: without weights whisper.cpp still loads a file, encodes at full cost, but decodes
	// faster (its never-written weights all read from one zero page): a lower bound.
	WhisperTinyEn  = "whisper-tiny.en"
	WhisperBaseEn  = "whisper-base.en"
	WhisperSmallEn = "whisper-small.en"
)

// Imitates returns the name, in modelstore's catalogue, of the real model whose shape the
// built-in shape name has, or "" when the catalogue has no such model.
func Imitates(name string) string {
	switch name {
	case Qwen25_05B, Qwen25_05BVocab32k:
		return "qwen2.5-0.5b-instruct"
	case WhisperTinyEn, WhisperBaseEn, WhisperSmallEn:
		return name
	}
	return ""
}

// ScriptPath is the script's place in the repository.
const ScriptPath = "scripts/shape-models"

// LLMShape is an LLM of custom dimensions, for tests that need a quick build. Vocab and
// Context default to the script's (32,000 and 2,048); the head size Hidden/Heads must be
// even and Heads a multiple of KVHeads.
type LLMShape struct {
	Name                                string
	Hidden, Layers, Heads, KVHeads, FFN int
	Vocab, Context                      int
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// spec is the script's --llm argument for s.
func (s LLMShape) spec() (string, error) {
	if !nameRE.MatchString(s.Name) {
		return "", fmt.Errorf("shapemodels: shape name %q: use lower-case letters, digits, '.', '_' and '-'", s.Name)
	}
	if s.Hidden <= 0 || s.Layers <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.FFN <= 0 {
		return "", fmt.Errorf("shapemodels: shape %s: hidden, layers, heads, kv heads and FFN must be positive", s.Name)
	}
	spec := fmt.Sprintf("%s:hidden=%d,layers=%d,heads=%d,kv_heads=%d,ffn=%d", s.Name, s.Hidden, s.Layers, s.Heads, s.KVHeads, s.FFN)
	if s.Vocab > 0 {
		spec += ",vocab=" + strconv.Itoa(s.Vocab)
	}
	if s.Context > 0 {
		spec += ",ctx=" + strconv.Itoa(s.Context)
	}
	return spec, nil
}

// Params is the number of weights of s, as llama.cpp counts them (model_n_params).
func (s LLMShape) Params() int64 {
	vocab := int64(s.Vocab)
	if vocab == 0 {
		vocab = 32000
	}
	h, f := int64(s.Hidden), int64(s.FFN)
	q := h                                      // heads × head size
	kv := int64(s.KVHeads) * h / int64(s.Heads) // kv heads × head size
	perLayer := 2*h + h*q + 2*h*kv + q*h + 3*h*f
	return 2*vocab*h + int64(s.Layers)*perLayer + h
}

// Builder runs scripts/shape-models. The zero value uses the script's defaults: the
// repository found from the working directory or the executable, the cache directory
// $PARLEY_SHAPE_MODELS_DIR or $PARLEY_CACHE_DIR/shape-models (~/.cache/parley/shape-models),
// and the shared assets at $PARLEY_SHARED or ../shared.
type Builder struct {
	Script string     // path of scripts/shape-models; "" finds it with FindScript
	Dir    string     // cache directory; "" keeps the script's default
	Shared string     // shared test-asset folder; "" keeps the script's default
	Custom []LLMShape // extra LLM shapes that Build may name
	Log    io.Writer  // the script's progress lines; nil drops them
}

// Model is one file the script wrote or found in its cache.
type Model struct {
	Name   string
	Path   string
	SHA256 string
	// Status is "cached", or what building the file took ("built in 12.1 s (...)").
	Status string
}

// Cached reports whether the file was already in the cache.
func (m Model) Cached() bool { return m.Status == "cached" }

// Ensure returns the path of the built-in shape name, building it first when the cache
// does not hold it (about 15 s for the 0.5B shape on two cores).
func Ensure(ctx context.Context, name string) (string, error) {
	return Builder{}.Ensure(ctx, name)
}

// Ensure returns the path of the shape name (built in or one of b.Custom), building it
// first when the cache does not hold it.
func (b Builder) Ensure(ctx context.Context, name string) (string, error) {
	models, err := b.Build(ctx, name)
	if err != nil {
		return "", err
	}
	return models[0].Path, nil
}

// Build makes sure every named shape is in the cache (all built-in ones when names is
// empty) and returns them in the order the script reports them.
func (b Builder) Build(ctx context.Context, names ...string) ([]Model, error) {
	script := b.Script
	if script == "" {
		var err error
		if script, err = FindScript(); err != nil {
			return nil, err
		}
	}
	var args []string
	if b.Dir != "" {
		args = append(args, "--dir", b.Dir)
	}
	if b.Shared != "" {
		args = append(args, "--shared", b.Shared)
	}
	for _, s := range b.Custom {
		spec, err := s.spec()
		if err != nil {
			return nil, err
		}
		args = append(args, "--llm", spec)
	}
	for _, n := range names {
		if strings.HasPrefix(n, "-") {
			return nil, fmt.Errorf("shapemodels: %q is not a shape name", n)
		}
	}
	args = append(args, names...)

	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if b.Log != nil {
		cmd.Stderr = io.MultiWriter(&stderr, b.Log)
	}
	// The script removes its half-written files when asked to stop; it gets a few seconds.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("shapemodels: %s stopped: %w", script, ctx.Err())
		}
		return nil, fmt.Errorf("shapemodels: %s %s: %w\n%s", script, strings.Join(args, " "), err, tail(stderr.String(), 2000))
	}
	models, err := parseOutput(stdout.String())
	if err != nil {
		return nil, fmt.Errorf("shapemodels: %s: %w", script, err)
	}
	if len(names) > 0 && len(models) != len(names) {
		return nil, fmt.Errorf("shapemodels: %s reported %d models for %d names", script, len(models), len(names))
	}
	return models, nil
}

// FindScript finds scripts/shape-models in the repository holding the working directory,
// or else in the one holding the executable (the agent is built into the repository's
// .build/ by scripts/bin/agent).
func FindScript() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
	}
	for _, dir := range starts {
		for {
			script := filepath.Join(dir, filepath.FromSlash(ScriptPath))
			if st, err := os.Stat(script); err == nil && st.Mode().IsRegular() {
				if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
					return script, nil
				}
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", errors.New("shapemodels: " + ScriptPath + " not found above the working directory or the executable; run from the Parley repository")
}

// parseOutput reads the script's stdout: one NAME<TAB>PATH<TAB>SHA256<TAB>STATUS line per model.
func parseOutput(out string) ([]Model, error) {
	var models []Model
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		m, err := parseLine(line)
		if err != nil {
			return nil, err
		}
		models = append(models, m)
	}
	if len(models) == 0 {
		return nil, errors.New("no models reported")
	}
	return models, nil
}

func parseLine(line string) (Model, error) {
	f := strings.Split(line, "\t")
	if len(f) != 4 {
		return Model{}, fmt.Errorf("unexpected output line %q (want NAME, PATH, SHA256 and STATUS separated by tabs)", line)
	}
	m := Model{Name: f[0], Path: f[1], SHA256: f[2], Status: f[3]}
	if !nameRE.MatchString(m.Name) {
		return Model{}, fmt.Errorf("unexpected model name %q in %q", m.Name, line)
	}
	if !filepath.IsAbs(m.Path) {
		return Model{}, fmt.Errorf("path %q in %q is not absolute", m.Path, line)
	}
	if len(m.SHA256) != 64 || strings.Trim(m.SHA256, "0123456789abcdef") != "" {
		return Model{}, fmt.Errorf("unexpected sha256 %q in %q", m.SHA256, line)
	}
	if m.Status == "" {
		return Model{}, fmt.Errorf("empty status in %q", line)
	}
	return m, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
