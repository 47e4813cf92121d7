// Package sphinx is the overlap module's recogniser: pocketsphinx (through the ASR's
// engine, modules/asr/sphinx) with a language model of the overlap vocabulary, which
// pipeline opens when the overlap module is on.
package sphinx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/modules/asr"
	asrsphinx "github.com/parley-voice/parley/modules/asr/sphinx"
	"github.com/parley-voice/parley/modules/overlap"
)

var _ overlap.Recognizer = (*Recognizer)(nil)

// Recognizer decodes sounds with the overlap vocabulary.
type Recognizer struct {
	eng *asrsphinx.Engine
	dir string
}

// New writes v's language model to a temporary directory and loads pocketsphinx with
// it; cfg gives the acoustic model and dictionary (its LM is replaced).
func New(v overlap.Vocabulary, cfg asr.PocketsphinxConfig) (*Recognizer, error) {
	dir, err := os.MkdirTemp("", "parley-overlap-")
	if err != nil {
		return nil, fmt.Errorf("overlap: %w", err)
	}
	path := filepath.Join(dir, "overlap.lm")
	f, err := os.Create(path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("overlap: %w", err)
	}
	if err := errors.Join(overlap.WriteLM(f, v), f.Close()); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("overlap: language model: %w", err)
	}
	if err := writeDict(filepath.Join(dir, "overlap.dict"), v, cfg.Dict); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cfg.Dict = filepath.Join(dir, "overlap.dict")
	cfg.LM = path
	cfg.FinalPass = true
	eng, err := asrsphinx.New(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("overlap: %w", err)
	}
	return &Recognizer{eng: eng, dir: dir}, nil
}

// FinalOf implements overlap.Recognizer.
func (r *Recognizer) FinalOf(ctx context.Context, samples []float32) (asr.Hypothesis, error) {
	return r.eng.FinalOf(ctx, samples)
}

// Close frees the decoder and removes the language model.
func (r *Recognizer) Close() error {
	return errors.Join(r.eng.Close(), os.RemoveAll(r.dir))
}

// writeDict writes the vocabulary's pronunciations, from dict (pocketsphinx's US
// English dictionary when empty), with the truncated ones of the interrupt words.
func writeDict(path string, v overlap.Vocabulary, dict string) error {
	if dict == "" {
		_, _, dict = pocketsphinx.DefaultModel()
	}
	in, err := regularfile.Open(dict)
	if err != nil {
		return fmt.Errorf("overlap: %w", err)
	}
	defer in.Close()
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("overlap: %w", err)
	}
	if err := errors.Join(overlap.WriteDict(out, v, in), out.Close()); err != nil {
		return fmt.Errorf("overlap: dictionary: %w", err)
	}
	return nil
}
