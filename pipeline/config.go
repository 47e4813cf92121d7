// Package pipeline assembles the agent: it loads the YAML configuration, builds the
// network of modules (input, VAD, ASR, dialogue manager, LLM, TTS, speaker) around the
// shared dialogue history, and runs it live or on recordings.
package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/logging"
	"github.com/parley-voice/parley/modelstore"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/overlap"
	"github.com/parley-voice/parley/modules/speaker/portaudio"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/turnend"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/turntaking"
	"github.com/parley-voice/parley/userdirs"
	"go.yaml.in/yaml/v3"
)

// Pipelines: how far the incremental processing reaches.
const (
	// Predictive: the LLM reads the user's words while they speak, a reply is prepared
	// during the user's pauses and plays at once when their turn ends with the same
	// words, and the end of the turn is predicted from the words and the LLM (package
	// turnend). The default.
	Predictive = "predictive"
	// Incremental: incremental recognition and speech, but the LLM starts at the end of
	// the user's turn, which a fixed silence decides (the architecture of Pipecat and
	// LiveKit Agents).
	Incremental = "incremental"
	// TurnBased: no partial recognition, and the whole reply is generated before the
	// agent speaks.
	TurnBased = "turn-based"
)

// Pipelines lists the pipelines, newest first.
var Pipelines = []string{Predictive, Incremental, TurnBased}

// Config is the agent's configuration file.
type Config struct {
	// Pipeline is predictive (the default), incremental or turn-based.
	Pipeline   string            `yaml:"pipeline"`
	Audio      AudioConfig       `yaml:"audio"`
	VAD        vad.Config        `yaml:"vad"`
	ASR        asr.Config        `yaml:"asr"`
	LLM        LLMConfig         `yaml:"llm"`
	TTS        tts.Config        `yaml:"tts"`
	Dialogue   DialogueConfig    `yaml:"dialogue"`
	TurnTaking turntaking.Config `yaml:"turn_taking"`
	// Overlap weighs the user's sounds over the agent (backchannels, noise, real
	// interruptions) for the turn-taking policy.
	Overlap overlap.Config `yaml:"overlap"`
	// EndOfTurn is the predictive pipeline's end-of-turn policy.
	EndOfTurn turnend.Config `yaml:"end_of_turn"`
	Session   SessionConfig  `yaml:"session"`
	Logging   logging.Config `yaml:"logging"`
	// Cores is how many cores the engines' thread plan divides (0: the machine's logical
	// CPUs); see ThreadPlan and 'agent doctor'.
	Cores int `yaml:"cores"`
}

// AudioConfig chooses the sound devices for live use.
type AudioConfig struct {
	// Input and Output name the devices: a name, part of a name, or an index (names
	// survive reboots, indices do not); empty means the system default.
	Input  string `yaml:"input"`
	Output string `yaml:"output"`
	// Frame is the duration of the audio IUs.
	Frame time.Duration `yaml:"frame"`
	// OutputLatency is the speaker's suggested device latency.
	OutputLatency time.Duration `yaml:"output_latency"`
	// InputLatency is the microphone's suggested device latency (0: the device's low latency).
	InputLatency time.Duration `yaml:"input_latency"`
	// EchoCancel is auto (the default), on or off: whether the microphone's audio goes
	// through the echo canceller (modules/aec) before the VAD and the recogniser, so
	// that the agent does not hear itself through the speakers. Auto cancels live
	// unless the output is a headset or the sound server already cancels echo, and in
	// replays when the scenario simulates a laptop (its echo: block). 'agent doctor'
	// says what auto decides and why.
	EchoCancel string `yaml:"echo_cancel"`
	// EchoEngine names the canceller (the configuration reference lists the engines;
	// empty: the default).
	EchoEngine string `yaml:"echo_engine"`
	// EchoDoubleTalk tunes AEC3's suppressor (the webrtc engine) to let a voice that
	// starts over the agent through from its first syllables, so that a barge-in is
	// heard sooner and missed less often. The price is more of the agent's echo in a
	// session's first second and at the ends of its phrases, which the overlap module
	// and the tail gate must tell from a voice (docs/PERFORMANCE.md has both
	// evaluations).
	EchoDoubleTalk bool `yaml:"echo_double_talk"`
}

// EchoCancelMode is the EchoCancel setting (Validate has checked it).
func (a AudioConfig) EchoCancelMode() aec.Mode {
	m, _ := aec.ParseMode(a.EchoCancel)
	return m
}

// LLMConfig chooses and tunes the language model.
type LLMConfig struct {
	// Engine names the LLM engine (the configuration reference lists the engines;
	// empty: the default).
	Engine string `yaml:"engine"`
	// Model is the llama engine's GGUF model: a file, or a name from 'agent models list'
	// (qwen2.5-0.5b-instruct).
	Model string `yaml:"model"`
	// URL, ServerModel, Mode and APIKeyEnv configure the http engine.
	URL         string `yaml:"url"`
	ServerModel string `yaml:"server_model"`
	Mode        string `yaml:"mode"`
	APIKeyEnv   string `yaml:"api_key_env"`
	// Threads and ThreadsBatch are the llama engine's threads for generating and for
	// reading prompts (0: the thread plan's, half the cores; see ThreadPlan).
	Threads      int `yaml:"threads"`
	ThreadsBatch int `yaml:"threads_batch"`
	// Context is the context length in tokens (0: the model's, at most 4096). It may not
	// exceed what the model was trained on, nor need more memory for its KV cache than
	// is available (checked when the model loads). With the http engine, a server that
	// reports its own (llama-server) is asked at start: a longer one is refused.
	Context int `yaml:"context"`
	// Timeout is how long the http engine waits for the server to start answering and,
	// while it streams, for its next piece (default 60 s).
	Timeout time.Duration `yaml:"timeout"`
	// MaxTokens limits each reply.
	MaxTokens int `yaml:"max_tokens"`
	// Temperature scales the logits before sampling; 0 is greedy (always the most likely token).
	Temperature float32 `yaml:"temperature"`
	// TopK samples among the K most likely tokens (0: off).
	TopK int `yaml:"top_k"`
	// TopP samples among the most likely tokens whose probabilities add up to P (0 or 1: off).
	TopP float32 `yaml:"top_p"`
	// MinP drops tokens less likely than P times the most likely one (0: off).
	MinP float32 `yaml:"min_p"`
	// RepeatPenalty above 1 discourages recently generated tokens (0 or 1: off).
	RepeatPenalty float32 `yaml:"repeat_penalty"`
	// Seed makes sampled (non-greedy) replies repeatable.
	Seed uint32 `yaml:"seed"`
	// ClauseMaxWords cuts a clause that runs this many words without punctuation, so
	// that speech can start (0: no limit; the benchmarks' random-weight models never
	// write punctuation).
	ClauseMaxWords int `yaml:"clause_max_words"`
	// FirstClauseMaxWords cuts the reply's first clause at this many words when no
	// punctuation came sooner (0: clause_max_words): speech starts after a few generated
	// words, and the rest of the sentence is generated while they are heard.
	FirstClauseMaxWords int `yaml:"first_clause_max_words"`
	// PiecesAsWords speaks every generated piece as one common English word: for models
	// with random weights (agent bench --realistic), whose text is not speakable.
	PiecesAsWords bool `yaml:"pieces_as_words"`
	// StreamClauses speaks each clause as soon as it is complete; false waits for the
	// whole reply (the turn-based baseline of `agent bench`).
	StreamClauses bool `yaml:"stream_clauses"`
}

// DialogueConfig shapes the prompt and the memory.
type DialogueConfig struct {
	// PromptFormat is a built-in format name (chatml, llama2, llama3, mistral, gemma,
	// plain, ...) or a JSON file.
	PromptFormat string `yaml:"prompt_format"`
	// SystemPrompt tells the LLM who it is and how to answer.
	SystemPrompt string `yaml:"system_prompt"`
	// UserRole and AgentRole, when set, replace the format's role names.
	UserRole  string `yaml:"user_role"`
	AgentRole string `yaml:"agent_role"`
	// InterruptedMark is shown after an interrupted agent turn in prompts ("" for none).
	InterruptedMark string `yaml:"interrupted_mark"`
	// ShowBackchannels shows the user's backchannels ("mm-hmm" while the agent spoke) in
	// prompts, after the agent's turn (joined with the user's next line, as consecutive
	// user utterances are); by default the history keeps them but prompts leave them out.
	ShowBackchannels bool `yaml:"show_backchannels"`
	// MinWordFraction is how much of a word's audio must have been heard for it to
	// count as heard when the agent is interrupted (default 0.5; 1: whole words only).
	MinWordFraction float64 `yaml:"min_word_fraction"`
	// ReplyReserve is how many context tokens are kept free for the reply.
	ReplyReserve int `yaml:"reply_reserve"`
	// Memory selects what of the history the prompt shows.
	Memory MemoryConfig `yaml:"memory"`
	// RemoveWords are dropped from the reply before it is spoken, even when split across
	// tokens (for example markup the model likes to emit).
	RemoveWords []string `yaml:"remove_words"`
}

// MemoryConfig chooses a conversation memory.
type MemoryConfig struct {
	// Strategy is buffer, window, summary or summary-buffer.
	Strategy string `yaml:"strategy"`
	// Window is the number of exchanges a window memory keeps.
	Window int `yaml:"window"`
	// TokenLimit is how many tokens of recent turns a summary-buffer keeps verbatim.
	TokenLimit int `yaml:"token_limit"`
}

// SessionConfig says where the conversation is saved.
type SessionConfig struct {
	// Dir is where sessions are saved (default: the sessions directory).
	Dir string `yaml:"dir"`
	// Name of this session's folder in Dir (default: the date and time).
	Name string `yaml:"name"`
	// AutoSave saves after every turn, so that a crash loses no finished turn.
	AutoSave bool `yaml:"auto_save"`
	// Resume continues the saved session Name instead of starting a new one.
	Resume bool `yaml:"resume"`
}

// Default returns the configuration for the real models Parley downloads
// (`agent models pull`): the catalog's default models (modelstore).
func Default(paths userdirs.Paths) Config {
	cat := modelstore.Builtin()
	model := func(kind modelstore.Kind) string {
		m, _ := cat.Default(kind)
		return filepath.Join(paths.Models, m.File)
	}
	a := asr.DefaultConfig()
	a.Engine = EngineWhisper // the recogniser of the catalog's default ASR model
	a.Whisper.Model = model(modelstore.KindASR)
	v := vad.DefaultConfig()
	v.Model = model(modelstore.KindVAD)
	// A tentative pause after one Silero window of silence: the predictive pipeline
	// prepares its reply from it (the others ignore it).
	v.PauseAfter = 32 * time.Millisecond
	llm, _ := cat.Default(modelstore.KindLLM)
	return Config{
		Audio: AudioConfig{Frame: audio.DefaultFrameDuration, OutputLatency: portaudio.DefaultLatency},
		VAD:   v,
		ASR:   a,
		LLM: LLMConfig{
			Engine: EngineLlama, Model: model(modelstore.KindLLM), MaxTokens: 120,
			Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1.1, StreamClauses: true,
			FirstClauseMaxWords: 3,
		},
		TTS: tts.DefaultConfig(),
		Dialogue: DialogueConfig{
			PromptFormat: llm.PromptFormat,
			SystemPrompt: "You are Parley, a friendly voice assistant. Your replies are spoken aloud, so answer in one or two short sentences, without lists or markup.",
			ReplyReserve: 160, InterruptedMark: "...",
			Memory:      MemoryConfig{Strategy: "buffer"},
			RemoveWords: []string{"*", "#"},
		},
		Pipeline:   Predictive,
		TurnTaking: turntaking.DefaultConfig(),
		Overlap:    defaultOverlap(),
		EndOfTurn:  turnend.DefaultConfig(),
		Session:    SessionConfig{Dir: paths.Sessions, AutoSave: true},
		Logging:    logging.Config{Level: "info"},
	}
}

// ErrInvalidConfig is wrapped by every configuration error.
var ErrInvalidConfig = errors.New("invalid configuration")

// MaxConfigBytes is the largest configuration file Load reads.
const MaxConfigBytes = 1 << 20

// Load reads a YAML configuration on top of base. Unknown keys are errors (with their
// line); ${VAR} and $VAR in paths are expanded, and relative paths are taken from the
// file's directory. A model given by its name in the catalog (modelstore, 'agent models
// list') is the shared test assets' copy when they hold one, else the models folder's.
func Load(path string, base Config) (Config, error) {
	data, err := regularfile.ReadFile(path, MaxConfigBytes)
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	dir := filepath.Dir(path)
	return Parse(data, dir, base)
}

// Parse is Load on bytes; dir resolves relative paths.
func Parse(data []byte, dir string, base Config) (Config, error) {
	cfg := base
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) { // an empty file keeps base
		return Config{}, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	var expandErr error
	fix := func(p *string) {
		if *p == "" || expandErr != nil {
			return
		}
		v, err := expandPath(*p, dir)
		if err != nil {
			expandErr = err
			return
		}
		*p = v
	}
	fixModel := func(p *string) {
		if m, ok := catalogModel(*p); ok {
			*p = userdirs.FromEnv().ModelFile(m.File)
			return
		}
		fix(p)
	}
	fixModel(&cfg.VAD.Model)
	fixModel(&cfg.ASR.Whisper.Model)
	fixModel(&cfg.LLM.Model)
	fix(&cfg.Session.Dir)
	fix(&cfg.Logging.File)
	if strings.ContainsAny(cfg.Dialogue.PromptFormat, "/\\") || strings.HasSuffix(cfg.Dialogue.PromptFormat, ".json") {
		fix(&cfg.Dialogue.PromptFormat)
	}
	if expandErr != nil {
		return Config{}, fmt.Errorf("%w: %v", ErrInvalidConfig, expandErr)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return WithPipeline(cfg, cfg.Pipeline), nil
}

// catalogModel returns the downloadable model that name names: a bare name from the
// catalog, not a path.
func catalogModel(name string) (modelstore.Model, bool) {
	if name == "" || strings.ContainsAny(name, "/\\$~") {
		return modelstore.Model{}, false
	}
	m, err := modelstore.Builtin().Find(name)
	return m, err == nil
}

// expandPath expands environment variables and ~, and makes relative paths relative to dir.
func expandPath(p, dir string) (string, error) {
	var missing []string
	p = os.Expand(p, func(name string) string {
		if v, ok := os.LookupEnv(name); ok {
			return v
		}
		if name == "PARLEY_SHARED" || name == "SHARED" {
			if s := userdirs.FromEnv().Shared; s != "" {
				return s
			}
		}
		missing = append(missing, name)
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("path %q uses unset variable(s) %s", p, strings.Join(missing, ", "))
	}
	if strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(home, p[2:])
	}
	if !filepath.IsAbs(p) && dir != "" {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p), nil
}

// defaultOverlap returns the overlap module's defaults, on.
func defaultOverlap() overlap.Config {
	c := overlap.DefaultConfig()
	c.Enabled = true
	return c
}
