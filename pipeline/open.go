package pipeline

import (
	"errors"
	"fmt"
	"io"

	"github.com/parley-voice/parley/engines/espeak"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/overlap"
	overlapsphinx "github.com/parley-voice/parley/modules/overlap/sphinx"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/tts/espeakng"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/modules/vad/silero"
	"github.com/parley-voice/parley/turntaking"
)

// The module packages are pure Go; the functions here open the engines a configuration
// names (the cgo adapters in the modules' subpackages) and make the modules around them.
// Each returns, beside the module, the function that frees its engine after the network
// ran.

// openVAD makes the VAD module with its Silero scorer.
func openVAD(name string, cfg vad.Config) (*vad.Module, func() error, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	scorer, err := silero.Open(cfg)
	if err != nil {
		return nil, nil, err
	}
	m, err := vad.New(name, cfg, scorer)
	if err != nil {
		scorer.Close()
		return nil, nil, err
	}
	return m, scorer.Close, nil
}

// ASREngine is a recogniser that holds native resources.
type ASREngine interface {
	asr.Engine
	io.Closer
}

// OpenASREngine opens the recogniser cfg.Engine names (EngineCatalog).
func OpenASREngine(cfg asr.Config) (ASREngine, error) {
	e, err := FindEngine(KeyASREngine, cfg.Engine)
	if err != nil {
		return nil, fmt.Errorf("asr: %w", err)
	}
	return e.openASR(cfg)
}

// RecogniserWrapper wraps the recogniser a configuration names: it returns the engine
// the ASR module recognises with, which closes e when it is closed.
type RecogniserWrapper func(e ASREngine) (ASREngine, error)

// openASR makes the ASR module with the engine cfg names, through wrap when it is set.
func openASR(name string, cfg asr.Config, wrap RecogniserWrapper) (*asr.Module, func() error, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	e, err := OpenASREngine(cfg)
	if err != nil {
		return nil, nil, err
	}
	if wrap != nil {
		w, err := wrap(e)
		if err != nil {
			e.Close()
			return nil, nil, err
		}
		e = w
	}
	if l, ok := e.(asr.SideLoader); ok && cfg.Speculative {
		if err := l.LoadSide(); err != nil {
			e.Close()
			return nil, nil, err
		}
	}
	m, err := asr.New(name, cfg, e)
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	return m, e.Close, nil
}

// openTTS makes the TTS module speaking with libespeak-ng, through wrap when it is set.
func openTTS(name string, cfg tts.Config, wrap func(tts.Engine) tts.Engine) (*tts.Module, func() error, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	e, err := espeakng.New(cfg)
	var unknown *espeak.VoiceError
	if errors.As(err, &unknown) {
		return nil, nil, fmt.Errorf("%w: voice: %w", ErrInvalidConfig, unknown)
	}
	if err != nil {
		return nil, nil, err
	}
	var voice tts.Engine = e
	if wrap != nil {
		voice = wrap(e)
	}
	m, err := tts.New(name, cfg, voice)
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	return m, e.Close, nil
}

// openCanceller opens the echo canceller a names (EngineCatalog), with aec.TailGate
// around it.
func openCanceller(a AudioConfig) (aec.Canceller, error) {
	e, err := FindEngine(KeyEchoEngine, a.EchoEngine)
	if err != nil {
		return nil, fmt.Errorf("aec: %w", err)
	}
	s, err := e.openEcho(a)
	if err != nil {
		return nil, err
	}
	return aec.NewTailGate(s, aec.TailConfig{})
}

// openAEC makes the echo-cancelling module around the engine's canceller.
func openAEC(name string, a AudioConfig, cfg aec.Config) (*aec.Module, func() error, error) {
	c, err := openCanceller(a)
	if err != nil {
		return nil, nil, err
	}
	m, err := aec.New(name, cfg, c)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return m, c.Close, nil
}

// CheckAECEngine opens and closes the echo canceller engine names, to tell whether it
// works here ('agent doctor').
func CheckAECEngine(engine string) error {
	c, err := openCanceller(AudioConfig{EchoEngine: engine})
	if err != nil {
		return err
	}
	return c.Close()
}

// openOverlap makes the overlap module, decoding with pocketsphinx (the ASR's acoustic
// model and dictionary) on a vocabulary of the barge-in's backchannels and interrupt
// words.
func openOverlap(name string, cfg overlap.Config, b turntaking.BargeInConfig, ps asr.PocketsphinxConfig) (*overlap.Module, func() error, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	backs, interrupts := b.WordLists()
	rec, err := overlapsphinx.New(overlap.Vocabulary{Backchannels: backs, Interrupt: interrupts, Common: cfg.Words}, ps)
	if err != nil {
		return nil, nil, err
	}
	m, err := overlap.New(name, cfg, rec)
	if err != nil {
		rec.Close()
		return nil, nil, err
	}
	return m, rec.Close, nil
}
