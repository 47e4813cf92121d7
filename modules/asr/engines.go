package asr

import "time"

// The engines' settings are plain data here, so that Config reads them from YAML; the
// engines themselves are cgo adapters in the subpackages whispercpp and sphinx, which
// pipeline opens.

// MaxBeamSize is the widest beam whisper.cpp decodes with (its WHISPER_MAX_DECODERS).
const MaxBeamSize = 8

// WhisperConfig configures the whisper.cpp engine (package whispercpp).
type WhisperConfig struct {
	// Model is a ggml whisper model: a file, or a name from 'agent models list'
	// (whisper-tiny.en).
	Model string `yaml:"model"`
	// Threads for decoding (min(4, CPUs) when zero).
	Threads int `yaml:"threads"`
	// FinalThreads for the decodes the user waits on: the one at a pause that covers all
	// of the speech, and the final (Threads when zero). They come in short bursts bound
	// by compute, so a machine with cores to spare may give them more.
	FinalThreads int `yaml:"final_threads"`
	// Language code, or "auto".
	Language string `yaml:"language"`
	// Prompt conditions the decoder (names, spelling, style).
	Prompt string `yaml:"prompt"`
	// BeamSize for the final decode (greedy when below 2); partial decodes are greedy.
	BeamSize int `yaml:"beam_size"`
	// UseGPU lets libwhisper use a GPU backend when one is loaded.
	UseGPU bool `yaml:"use_gpu"`
	// ShortContext runs partial decodes with the encoder window cut to the audio's
	// length instead of whisper's fixed 30 s: several times faster for utterances of a
	// few seconds, slightly less accurate. The final decode follows FullFinal.
	ShortContext bool `yaml:"short_context"`
	// FullFinal decodes every final with whisper's full 30 s encoder window, the one it
	// was trained on (the most accurate, but a whole 30 s encode after the user stopped,
	// every turn), instead of the default quick final: the latest partial when it
	// decoded all of the speech, else the same audio in a window cut to it plus 1.28 s
	// of padding, either of which may cost accuracy on some utterances. The quick final
	// costs a partial's time or nothing: a partial runs at the VAD's pause, whatever
	// the hop, and its audio differs from the full pass's only by the silence after the
	// speech; it is a greedy decode without temperature fallback, with the window cut
	// as short_context cuts it, while a cut-window final keeps the beam and fallback.
	// whisper can drop or repeat a word at the edge of a short window: turn this on
	// where accuracy matters more than a reply a second sooner.
	FullFinal bool `yaml:"full_final"`
	// Fallback retries a final decode that fails whisper's quality checks at higher
	// temperatures (whisper's default behaviour); partial decodes never retry.
	Fallback bool `yaml:"fallback"`
}

// DefaultWhisperConfig returns English, greedy decoding, short-context partials and
// temperature fallback for the final decode. Model is empty: callers point it at their
// model directory.
func DefaultWhisperConfig() WhisperConfig {
	return WhisperConfig{Language: "en", UseGPU: true, ShortContext: true, Fallback: true}
}

// PocketsphinxConfig configures the pocketsphinx engine (package sphinx). Empty fields
// keep pocketsphinx's defaults, which on Debian are the US English model of
// pocketsphinx-en-us.
type PocketsphinxConfig struct {
	// HMM is the acoustic model directory.
	HMM string `yaml:"hmm"`
	// LM is the n-gram language model file.
	LM string `yaml:"lm"`
	// Dict is the pronunciation dictionary.
	Dict string `yaml:"dict"`
	// SampleRate of the audio fed to the decoder (16000 when zero).
	SampleRate int `yaml:"sample_rate"`
	// LogLevel is the least severe message pocketsphinx prints: DEBUG, INFO, WARN, ERROR
	// or FATAL ("ERROR" when empty). pocketsphinx's log level is process-wide.
	LogLevel string `yaml:"log_level"`
	// Options sets any other decoder parameter by its name without the dash ("beam",
	// "cmn", "bestpath", ...), as pocketsphinx's JSON configuration does.
	Options map[string]any `yaml:"options"`
	// MaxHMMsPerFrame caps the HMMs the first search pass keeps active per frame
	// (pocketsphinx's maxhmmpf, whose own default, 30000, caps nothing in practice). In
	// noise or a pause the search otherwise keeps every path within the beam, and a
	// frame costs several times what one of clear speech does. 10000 takes about a
	// third off the decoding time of the shared recordings, and their word error rates
	// move by a word or two (docs/PERFORMANCE.md, CPU and word error rates). 0 leaves
	// pocketsphinx's default; Options' "maxhmmpf" wins over it.
	MaxHMMsPerFrame int `yaml:"max_hmms_per_frame"`
	// FinalPass decodes the whole utterance once more at the end, in one piece, as
	// `pocketsphinx single` does: it normalises the utterance by its own cepstral mean,
	// which the streaming pass, whose hypotheses serve as the partial results, only
	// learns as it goes (from the model's default at first).
	FinalPass bool `yaml:"final_pass"`
	// AdaptAfter ends the final pass once the streaming pass has decoded this much
	// audio: its live cepstral mean has adapted to the microphone and the speaker by
	// then, and its own final hypotheses are as accurate (docs/PERFORMANCE.md, word error
	// rates), without a second decode after the user stopped. 0 keeps the final pass for every utterance.
	AdaptAfter time.Duration `yaml:"adapt_after"`
	// FastOwnFinals ends the streaming pass's utterances without pocketsphinx's second
	// and third passes (fwdflat and bestpath): its own finals are then the first pass's
	// words, the ones its partial hypotheses showed, in a few milliseconds instead of
	// 50–150 ms, and a reply prepared on the partial words is rarely prepared again for
	// different final ones. The passes are worth about 2 WER points on the shared
	// recordings (docs/PERFORMANCE.md, word error rates). Without bestpath
	// pocketsphinx gives no word posteriors (confidence 1); the final pass keeps both
	// passes and its posteriors.
	FastOwnFinals bool `yaml:"fast_own_finals"`
	// EarlyAdapt adapts within the session's first utterance, so that no first turn
	// waits for a final pass after the user stopped: once AdaptAfter of its audio is in,
	// its final is the streaming pass's own, which starts the utterance again from the
	// cepstral mean of that much (its words then come from the mean of its first
	// AdaptAfter rather than of all of it, and, with FastOwnFinals, from the first
	// search pass alone: fewer of them are right). The next decode, while the user still
	// speaks or at the pause, runs the final pass over that much on the side and
	// decodes the utterance again. Utterances shorter than AdaptAfter keep the final
	// pass. Off by default: a session's first utterance costs about 6 more WER points
	// with it (docs/PERFORMANCE.md, word error rates), the demo's barge-in, over
	// synthesised speech, is no longer heard as one, and on a machine where decoding the
	// utterance again costs what the final pass costs (2 cores), the first turn's final
	// waits for that decode instead, as long.
	EarlyAdapt bool `yaml:"early_adapt"`
}

// ownFinals reports whether some finals are the streaming pass's own.
func (c PocketsphinxConfig) ownFinals() bool { return !c.FinalPass || c.AdaptAfter > 0 }

// DecoderOptions are the decoder options of every pass: Options, with MaxHMMsPerFrame
// (unless Options sets maxhmmpf).
func (c PocketsphinxConfig) DecoderOptions() map[string]any {
	return c.withDefaults(nil)
}

// StreamingOptions are the decoder options of the streaming pass: DecoderOptions, with
// the second and third passes off when FastOwnFinals applies (unless Options sets them).
func (c PocketsphinxConfig) StreamingOptions() map[string]any {
	if !c.FastOwnFinals || !c.ownFinals() {
		return c.DecoderOptions()
	}
	return c.withDefaults(map[string]any{"fwdflat": false, "bestpath": false})
}

// withDefaults returns Options over defaults, with MaxHMMsPerFrame among the defaults.
func (c PocketsphinxConfig) withDefaults(defaults map[string]any) map[string]any {
	opts := make(map[string]any, len(defaults)+len(c.Options)+1)
	for k, v := range defaults {
		opts[k] = v
	}
	if c.MaxHMMsPerFrame > 0 {
		opts["maxhmmpf"] = c.MaxHMMsPerFrame
	}
	for k, v := range c.Options {
		opts[k] = v
	}
	return opts
}

// FinalPassApart reports whether the final pass needs a decoder of its own: the
// streaming one searches differently.
func (c PocketsphinxConfig) FinalPassApart() bool {
	return c.FinalPass && c.FastOwnFinals && c.ownFinals()
}

// DefaultPocketsphinxConfig returns pocketsphinx's own model defaults, its search capped
// (MaxHMMsPerFrame), with a final pass for the first second of audio.
func DefaultPocketsphinxConfig() PocketsphinxConfig {
	return PocketsphinxConfig{FinalPass: true, AdaptAfter: time.Second, FastOwnFinals: true, MaxHMMsPerFrame: 10000}
}
