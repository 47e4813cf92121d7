package pipeline

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/engines/speexdsp"
	"github.com/parley-voice/parley/engines/webrtcapm"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/aec/speex"
	"github.com/parley-voice/parley/modules/aec/webrtc"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/asr/sphinx"
	"github.com/parley-voice/parley/modules/asr/whispercpp"
	"go.uber.org/zap"
)

// The engines a configuration can name. EngineCatalog is the one table of them:
// validation, opening, 'agent doctor' and the configuration reference read it, in the
// manner of database/sql's drivers but without a registry that changes at run time.
const (
	EnginePocketsphinx = "pocketsphinx"
	EngineWhisper      = "whisper"
	EngineLlama        = "llama"
	EngineHTTP         = "http"
	EngineWebRTC       = "webrtc"
	EngineSpeex        = "speex"
)

// The configuration keys that name an engine.
const (
	KeyASREngine  = "asr.engine"
	KeyLLMEngine  = "llm.engine"
	KeyEchoEngine = "audio.echo_engine"
)

// NamedEngine is an engine a configuration can name.
type NamedEngine struct {
	// Key is the configuration key that names it, Name its name there.
	Key, Name string
	// Description says what it is.
	Description string
	// Default: the engine the key means when it is empty.
	Default bool

	// uses is what of the configuration it runs with (a model file, a server), "" for
	// nothing.
	uses func(Config) string
	// needs is what it needs besides its libraries.
	needs func(Config) []Need
	// check reports what the configuration lacks for it.
	check func(Config) error
	// The opener of the engine's kind (Key).
	openASR  func(asr.Config) (ASREngine, error)
	openLLM  func(Config, *zap.Logger) (*Engines, error)
	openEcho func(AudioConfig) (*aec.Stream, error)
}

// Need is something an engine needs besides its libraries, which 'agent doctor' checks.
type Need struct {
	// What needs it, as the doctor names it: "asr (whisper)".
	What string
	// Path must exist: a model file or folder ("": nothing to check).
	Path string
	// Model says Path is a model file the configuration names (the models catalog says
	// how to fetch it).
	Model bool
	// Detail is shown in place of Path.
	Detail string
	// Fix says how to provide it (for a model: the catalog's, when empty).
	Fix string
}

// EngineCatalog returns every engine a configuration can name, by key, in the order
// they are listed to users.
func EngineCatalog() []NamedEngine {
	return []NamedEngine{
		{Key: KeyASREngine, Name: EnginePocketsphinx, Default: true,
			Description: "CMU pocketsphinx with Debian's US English model (no download; package asr/sphinx)",
			needs: func(Config) []Need {
				dir := filepath.Join(pocketsphinx.DefaultModelDir(), "en-us")
				return []Need{{What: "asr (pocketsphinx)", Path: filepath.Join(dir, "en-us"), Detail: dir, Fix: "apt install pocketsphinx-en-us"}}
			},
			openASR: func(c asr.Config) (ASREngine, error) { return asrEngine(sphinx.New(c.Pocketsphinx)) }},
		{Key: KeyASREngine, Name: EngineWhisper,
			Description: "whisper.cpp with a ggml model, asr.whisper.model (package asr/whispercpp)",
			uses:        func(c Config) string { return c.ASR.Whisper.Model },
			needs: func(c Config) []Need {
				return []Need{{What: "asr (whisper)", Path: c.ASR.Whisper.Model, Model: true}}
			},
			openASR: func(c asr.Config) (ASREngine, error) { return asrEngine(whispercpp.New(c.Whisper)) }},
		{Key: KeyLLMEngine, Name: EngineLlama, Default: true,
			Description: "llama.cpp in this process, with the GGUF model llm.model (package llm/llamacpp)",
			uses:        func(c Config) string { return c.LLM.Model },
			needs:       func(c Config) []Need { return []Need{{What: "llm (llama.cpp)", Path: c.LLM.Model, Model: true}} },
			check: func(c Config) error {
				if c.LLM.Model == "" {
					return errors.New("the llama engine needs a model file")
				}
				return nil
			},
			openLLM: loadLlama},
		{Key: KeyLLMEngine, Name: EngineHTTP,
			Description: "an OpenAI-compatible server at llm.url, such as llama-server (llm.HTTPEngine)",
			uses:        func(c Config) string { return c.LLM.URL },
			needs: func(c Config) []Need {
				return []Need{{What: "llm (http)", Detail: c.LLM.URL + " (reached when the agent starts)"}}
			},
			check: func(c Config) error {
				if c.LLM.URL == "" {
					return errors.New("the http engine needs a url")
				}
				return nil
			},
			openLLM: loadHTTP},
		{Key: KeyEchoEngine, Name: EngineWebRTC, Default: true,
			Description: "WebRTC's AEC3, with its linear output, which the overlap module and the recogniser decode (package aec/webrtc)",
			openEcho: func(a AudioConfig) (*aec.Stream, error) {
				cfg := webrtcapm.Config{LinearOutput: true}
				if a.EchoDoubleTalk {
					cfg.Suppressor = webrtc.DoubleTalk()
				}
				return webrtc.New(cfg)
			}},
		{Key: KeyEchoEngine, Name: EngineSpeex,
			Description: "speexdsp's canceller; a fallback that converges more slowly (package aec/speex)",
			check: func(c Config) error {
				if c.Audio.EchoDoubleTalk {
					return errors.New("echo_double_talk tunes AEC3's suppressor: it needs the webrtc engine")
				}
				return nil
			},
			openEcho: func(AudioConfig) (*aec.Stream, error) { return speex.New(speexdsp.Config{}) }},
	}
}

// asrEngine returns what an adapter's New returned, without a nil adapter in a non-nil
// interface.
func asrEngine[E ASREngine](e E, err error) (ASREngine, error) {
	if err != nil {
		return nil, err
	}
	return e, nil
}

// FindEngine returns the engine key names name ("": the key's default). The error
// names the key's last part and the engines it may name.
func FindEngine(key, name string) (NamedEngine, error) {
	var names []string
	for _, e := range EngineCatalog() {
		if e.Key != key {
			continue
		}
		if e.Name == name || name == "" && e.Default {
			return e, nil
		}
		names = append(names, e.Name)
	}
	field := key[strings.LastIndexByte(key, '.')+1:]
	return NamedEngine{}, fmt.Errorf("%s %q (want %s)", field, name, strings.Join(names, " or "))
}

// DefaultEngine returns the name of the engine key means when it is empty.
func DefaultEngine(key string) string {
	e, _ := FindEngine(key, "")
	return e.Name
}

// ConfiguredEngines returns the engines cfg names that it can find: the recogniser, the
// LLM and the echo canceller.
func ConfiguredEngines(cfg Config) []NamedEngine {
	var out []NamedEngine
	for _, k := range []struct{ key, name string }{
		{KeyASREngine, cfg.ASR.Engine}, {KeyLLMEngine, cfg.LLM.Engine}, {KeyEchoEngine, cfg.Audio.EchoEngine},
	} {
		if e, err := FindEngine(k.key, k.name); err == nil {
			out = append(out, e)
		}
	}
	return out
}

// Uses returns what of cfg the engine runs with: a model file or a server's URL (""
// for nothing).
func (e NamedEngine) Uses(cfg Config) string {
	if e.uses == nil {
		return ""
	}
	return e.uses(cfg)
}

// Needs returns what the engine needs under cfg besides its libraries.
func (e NamedEngine) Needs(cfg Config) []Need {
	if e.needs == nil {
		return nil
	}
	return e.needs(cfg)
}

// validEngines reports the engines cfg names that are unknown, and what cfg lacks for
// those it names.
func validEngines(cfg Config) []error {
	var errs []error
	for _, k := range []struct{ section, key, name string }{
		{"asr", KeyASREngine, cfg.ASR.Engine}, {"llm", KeyLLMEngine, cfg.LLM.Engine}, {"audio", KeyEchoEngine, cfg.Audio.EchoEngine},
	} {
		e, err := FindEngine(k.key, k.name)
		if err == nil && e.check != nil {
			err = e.check(cfg)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k.section, err))
		}
	}
	return errs
}
