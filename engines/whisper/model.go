package whisper

/*
#include <math.h>
#include <stdlib.h>
#include <whisper.h>

// The abort flag is C memory written by Go (on context cancellation) and read by
// libwhisper's compute threads between graph nodes; atomics keep both sides honest.
static bool parley_whisper_abort(void *flag) {
	return __atomic_load_n((int *)flag, __ATOMIC_RELAXED) != 0;
}

static void parley_whisper_set_abort(struct whisper_full_params *p, int *flag) {
	p->abort_callback = parley_whisper_abort;
	p->abort_callback_user_data = flag;
}

static void parley_whisper_flag(int *flag, int v) {
	__atomic_store_n(flag, v, __ATOMIC_RELAXED);
}

// A decode of exactly *want text tokens: the end of text is suppressed until that many
// were decoded, then it is the only token left, and special tokens never come.
static void parley_whisper_text_tokens(struct whisper_context *ctx, struct whisper_state *state,
		const whisper_token_data *tokens, int n_tokens, float *logits, void *want) {
	(void)state; (void)tokens;
	const int eot = whisper_token_eot(ctx), n_vocab = whisper_n_vocab(ctx);
	if (n_tokens >= *(int *)want) {
		for (int i = 0; i < n_vocab; i++) {
			logits[i] = i == eot ? 0.0f : -INFINITY;
		}
		return;
	}
	for (int i = eot; i < n_vocab; i++) {
		logits[i] = -INFINITY;
	}
}

// Random weights fail every quality check: a real model's decode passes them on its
// first try, so neither the temperature fallback nor the silence check may run again
// or drop what was decoded.
static void parley_whisper_set_text_tokens(struct whisper_full_params *p, int *want) {
	p->logits_filter_callback = parley_whisper_text_tokens;
	p->logits_filter_callback_user_data = want;
	p->no_timestamps = true;
	p->logprob_thold = -INFINITY;
	p->entropy_thold = -INFINITY;
	p->no_speech_thold = 2.0f;
}
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"github.com/parley-voice/parley/internal/regularfile"
)

// ModelParams configures how a whisper model is loaded.
type ModelParams struct {
	// UseGPU lets libwhisper use a GPU backend when ggml loaded one.
	UseGPU bool
	// FlashAttention enables flash attention (faster on GPUs, unsupported by some backends).
	FlashAttention bool
	// GPUDevice selects the GPU when there are several.
	GPUDevice int
}

// Model is a loaded whisper model (weights and vocabulary). Decoders made from it hold
// the per-decode state; one Model serves any number of Decoders concurrently.
type Model struct {
	ctx *C.struct_whisper_context
}

// LoadModel loads a ggml whisper model file. ggml's backends must be loaded first
// (engines/ggml.LoadBackends); without them libwhisper aborts the process.
func LoadModel(path string, p ModelParams) (*Model, error) {
	if err := regularfile.Check(path); err != nil {
		return nil, fmt.Errorf("whisper: load model: %w: %w", ErrLoad, err)
	}
	cp := C.whisper_context_default_params()
	cp.use_gpu = C.bool(p.UseGPU)
	cp.flash_attn = C.bool(p.FlashAttention)
	cp.gpu_device = C.int(p.GPUDevice)
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	// No default state: every Decoder brings its own, so decoders never share buffers.
	ctx := C.whisper_init_from_file_with_params_no_state(cpath, cp)
	if ctx == nil {
		return nil, fmt.Errorf("whisper: load model %s: %w", path, ErrLoad)
	}
	return &Model{ctx: ctx}, nil
}

// Close frees the model. Close its Decoders first.
func (m *Model) Close() error {
	if m.ctx != nil {
		C.whisper_free(m.ctx)
		m.ctx = nil
	}
	return nil
}

// Type returns the model's size class as libwhisper names it ("tiny", "base", ...).
func (m *Model) Type() string {
	if m.ctx == nil {
		return ""
	}
	return C.GoString(C.whisper_model_type_readable(m.ctx))
}

// TokenCount returns how many tokens the model's vocabulary spells text with.
func (m *Model) TokenCount(text string) (int, error) {
	if m.ctx == nil {
		return 0, ErrClosed
	}
	if text == "" {
		return 0, nil
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	n := int(C.whisper_token_count(m.ctx, ctext))
	if n < 0 {
		return 0, fmt.Errorf("whisper: cannot tokenize %q", text)
	}
	return n, nil
}

// Multilingual reports whether the model knows other languages than English.
func (m *Model) Multilingual() bool {
	return m.ctx != nil && C.whisper_is_multilingual(m.ctx) != 0
}

// KnownLanguage reports whether code is a language whisper decodes ("en", "de", ...; not
// "auto"). whisper.cpp takes an unknown code without a word and decodes with a wrong
// language token.
func KnownLanguage(code string) bool {
	if code == "" || strings.IndexByte(code, 0) >= 0 {
		return false
	}
	c := C.CString(code)
	defer C.free(unsafe.Pointer(c))
	return C.whisper_lang_id(c) >= 0
}

// DecodeParams are the decoding options of one Decode call.
type DecodeParams struct {
	// Threads is the number of CPU threads (1 when zero).
	Threads int
	// Language is a language code ("en", "de", ...) or "auto" to detect it; empty means "en".
	Language string
	// InitialPrompt is text that conditions the decoder (names, spelling, style).
	InitialPrompt string
	// BeamSize > 1 uses beam search; otherwise greedy decoding.
	BeamSize int
	// SingleSegment asks for one segment for the whole audio, which suits short,
	// re-decoded utterances.
	SingleSegment bool
	// TokenTimestamps computes a start and end time for every token (needed for word times).
	TokenTimestamps bool
	// NoFallback disables the temperature fallback: a decode that fails the quality
	// thresholds is not retried at higher temperatures, which keeps partial decodes fast.
	NoFallback bool
	// NoSpeechThreshold is the no-speech probability above which a segment counts as
	// silence (libwhisper's default when zero).
	NoSpeechThreshold float32
	// SuppressNonSpeech keeps the decoder from producing non-speech tokens (music
	// notes, sound annotations), which a dialogue has no use for.
	SuppressNonSpeech bool
	// AudioContext shrinks the encoder's window (in 20 ms mel frames, at most 1500 =
	// 30 s) to fit short audio. The encoder's cost is proportional to it, so partial
	// decodes of a few seconds get much faster, at some loss of accuracy. Zero keeps
	// the full 30 s window.
	AudioContext int
	// ForceTextTokens makes the decode produce exactly TextTokens text tokens (and no
	// timestamps), whatever the model prefers, in one try (no fallback, no silence
	// check): a model of a real one's shape with random weights then costs what the real
	// one costs for a transcript of that length (agent bench --realistic).
	ForceTextTokens bool
	TextTokens      int
}

// AudioContextFor returns an AudioContext that covers n samples plus a margin, for
// DecodeParams.AudioContext; 0 (the full window) when the audio is 30 s or longer.
func AudioContextFor(n int) int {
	const full = 1500 // mel frames in whisper's 30 s window, 20 ms each after the conv
	frames := n/(SampleRate/50) + 64
	if frames >= full {
		return 0
	}
	return frames
}

// Segment is one text segment of a decode.
type Segment struct {
	// Start and End are relative to the start of the decoded samples.
	Start, End time.Duration
	Text       string
	Tokens     []Token
}

// Token is one decoded token.
type Token struct {
	ID   int
	Text string
	// Start and End are relative to the start of the decoded samples; they are zero
	// unless TokenTimestamps was set.
	Start, End time.Duration
	// P is the token's probability.
	P float32
	// Special marks control tokens (timestamps, end of text, ...), which carry no text.
	Special bool
}

// Decoder decodes audio with a Model. It owns libwhisper's decode state (mel, KV caches,
// results); it is not safe for concurrent use, but separate Decoders are.
type Decoder struct {
	model *Model
	state *C.struct_whisper_state
}

// NewDecoder allocates a decode state for the model.
func (m *Model) NewDecoder() (*Decoder, error) {
	if m.ctx == nil {
		return nil, ErrClosed
	}
	st := C.whisper_init_state(m.ctx)
	if st == nil {
		return nil, errors.New("whisper: could not allocate a decoder state")
	}
	return &Decoder{model: m, state: st}, nil
}

// Close frees the decoder's state.
func (d *Decoder) Close() error {
	if d.state != nil {
		C.whisper_free_state(d.state)
		d.state = nil
	}
	return nil
}

// Decode transcribes 16 kHz mono samples. Cancelling ctx aborts the decode where
// libwhisper next checks (between the stages of a decode: the conv, the encoder, the
// cross attention, each decoder call) and returns ctx's error.
func (d *Decoder) Decode(ctx context.Context, samples []float32, p DecodeParams) ([]Segment, error) {
	if d.state == nil || d.model.ctx == nil {
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(samples) == 0 {
		return nil, nil
	}
	strategy := C.enum_whisper_sampling_strategy(C.WHISPER_SAMPLING_GREEDY)
	if p.BeamSize > 1 {
		strategy = C.WHISPER_SAMPLING_BEAM_SEARCH
	}
	wp := C.whisper_full_default_params(strategy)
	wp.n_threads = C.int(max(p.Threads, 1))
	wp.print_progress = false
	wp.print_realtime = false
	wp.print_timestamps = false
	wp.print_special = false
	wp.no_context = true
	wp.single_segment = C.bool(p.SingleSegment)
	wp.token_timestamps = C.bool(p.TokenTimestamps)
	if p.BeamSize > 1 {
		wp.beam_search.beam_size = C.int(p.BeamSize)
	}
	if p.NoFallback {
		wp.temperature_inc = 0
	}
	wp.suppress_nst = C.bool(p.SuppressNonSpeech)
	if p.AudioContext > 0 {
		wp.audio_ctx = C.int(p.AudioContext)
	}
	if p.NoSpeechThreshold > 0 {
		wp.no_speech_thold = C.float(p.NoSpeechThreshold)
	}
	lang := p.Language
	if lang == "" {
		lang = "en"
	}
	if lang == "auto" {
		wp.detect_language = false // "auto" with language=nullptr detects and transcribes
		wp.language = nil
	} else {
		clang := C.CString(lang)
		defer C.free(unsafe.Pointer(clang))
		wp.language = clang
	}
	if p.InitialPrompt != "" {
		cprompt := C.CString(p.InitialPrompt)
		defer C.free(unsafe.Pointer(cprompt))
		wp.initial_prompt = cprompt
	}
	if p.ForceTextTokens {
		want := (*C.int)(C.malloc(C.size_t(unsafe.Sizeof(C.int(0)))))
		defer C.free(unsafe.Pointer(want))
		*want = C.int(max(p.TextTokens, 0))
		C.parley_whisper_set_text_tokens(&wp, want)
	}
	// The abort flag is C memory, one per decode: libwhisper keeps its address for the
	// whole call, and a cancellation that fires late must not touch the next decode.
	flag := (*C.int)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int(0)))))
	defer C.free(unsafe.Pointer(flag))
	C.parley_whisper_set_abort(&wp, flag)
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		C.parley_whisper_flag(flag, 1)
		close(fired)
	})
	rc := C.whisper_full_with_state(d.model.ctx, d.state, wp, (*C.float)(unsafe.Pointer(&samples[0])), C.int(len(samples)))
	runtime.KeepAlive(samples)
	if !stop() {
		// The cancellation started: let it finish with the flag before the flag is
		// freed, and report it, since the decode may have been cut short.
		<-fired
		return nil, ctx.Err()
	}
	if rc != 0 {
		return nil, fmt.Errorf("whisper: decode failed (whisper_full returned %d)", int(rc))
	}
	return d.results(), nil
}

// results copies the state's segments and tokens into Go values.
func (d *Decoder) results() []Segment {
	ctx, st := d.model.ctx, d.state
	eot := C.whisper_token_eot(ctx)
	n := int(C.whisper_full_n_segments_from_state(st))
	segs := make([]Segment, 0, n)
	for i := 0; i < n; i++ {
		ci := C.int(i)
		seg := Segment{
			Start: centiseconds(int64(C.whisper_full_get_segment_t0_from_state(st, ci))),
			End:   centiseconds(int64(C.whisper_full_get_segment_t1_from_state(st, ci))),
			Text:  C.GoString(C.whisper_full_get_segment_text_from_state(st, ci)),
		}
		nt := int(C.whisper_full_n_tokens_from_state(st, ci))
		seg.Tokens = make([]Token, 0, nt)
		for j := 0; j < nt; j++ {
			cj := C.int(j)
			td := C.whisper_full_get_token_data_from_state(st, ci, cj)
			seg.Tokens = append(seg.Tokens, Token{
				ID:      int(td.id),
				Text:    C.GoString(C.whisper_full_get_token_text_from_state(ctx, st, ci, cj)),
				Start:   centiseconds(int64(td.t0)),
				End:     centiseconds(int64(td.t1)),
				P:       float32(td.p),
				Special: td.id >= eot,
			})
		}
		segs = append(segs, seg)
	}
	return segs
}

func centiseconds(cs int64) time.Duration {
	if cs < 0 {
		return 0
	}
	return time.Duration(cs) * 10 * time.Millisecond
}

// Word is a word assembled from tokens: whisper's byte-pair tokens start a new word when
// their text begins with a space.
type Word struct {
	Text       string
	Start, End time.Duration
	// P is the mean probability of the word's tokens.
	P float32
}

// Words joins the non-special tokens of segs into words.
func Words(segs []Segment) []Word {
	var (
		words []Word
		cur   *Word
		sumP  float32
		nTok  int
	)
	flush := func() {
		if cur == nil {
			return
		}
		cur.Text = strings.TrimSpace(cur.Text)
		if cur.Text != "" {
			cur.P = sumP / float32(nTok)
			words = append(words, *cur)
		}
		cur, sumP, nTok = nil, 0, 0
	}
	for _, s := range segs {
		for _, t := range s.Tokens {
			if t.Special || t.Text == "" {
				continue
			}
			if cur == nil || strings.HasPrefix(t.Text, " ") {
				flush()
				cur = &Word{Start: t.Start, End: t.End}
			}
			cur.Text += t.Text
			if t.End > cur.End {
				cur.End = t.End
			}
			sumP += t.P
			nTok++
		}
		flush() // a segment boundary always ends a word
	}
	return words
}
