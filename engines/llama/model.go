package llama

/*
#cgo pkg-config: llama
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/internal/regularfile"
)

// Token is a token id of a model's vocabulary.
type Token int32

// NoToken is llama.cpp's "no such token" (LLAMA_TOKEN_NULL), returned for special tokens a
// vocabulary does not have.
const NoToken Token = -1

// ErrClosed is returned (wrapped) by every method of a Model, Context, Batch or Sampler
// called after its Close.
var ErrClosed = errors.New("llama: use of closed resource")

// ModelParams configures LoadModel. The zero value loads every weight into memory for CPU
// inference.
type ModelParams struct {
	// VocabOnly loads only the vocabulary: tokenization works, contexts cannot be made.
	VocabOnly bool
	// UseMmap maps the file into memory instead of reading it (faster loads, shared pages).
	UseMmap bool
	// GPULayers is how many layers to offload to a GPU backend (negative: all). It has no
	// effect when only the CPU backend is loaded.
	GPULayers int
}

// Model is a loaded GGUF model: weights and vocabulary. Its methods are safe for
// concurrent use. The C model lives until Close was called and every Context made from
// it was closed.
type Model struct {
	mu       sync.RWMutex
	m        *C.struct_llama_model
	vocab    *C.struct_llama_vocab
	closed   bool
	contexts int // open contexts; they keep the C model alive after Close

	path      string
	vocabOnly bool
	nVocab    int
	nCtxTrain int
	shape     Shape
	bos, eos  Token
	eot, nl   Token
	addBOS    bool
	desc      string
}

// LoadModel loads a GGUF file. It loads ggml's compute backends first (engines/ggml).
func LoadModel(path string, p ModelParams) (*Model, error) {
	if err := ggml.LoadBackends(); err != nil {
		return nil, fmt.Errorf("llama: load %s: %w", path, err)
	}
	if err := regularfile.Check(path); err != nil {
		return nil, fmt.Errorf("llama: load model: %w", err)
	}
	params := C.llama_model_default_params()
	params.vocab_only = C.bool(p.VocabOnly)
	params.n_gpu_layers = C.int32_t(p.GPULayers)
	if p.UseMmap {
		params.load_mode = C.LLAMA_LOAD_MODE_MMAP
	} else {
		params.load_mode = C.LLAMA_LOAD_MODE_NONE
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	cm := C.llama_model_load_from_file(cpath, params)
	if cm == nil {
		return nil, fmt.Errorf("llama: load %s: llama.cpp could not load the model (not a GGUF file, unsupported architecture or out of memory; llama.cpp's log lines at info level, see SetLogger, say why)", path)
	}
	m := &Model{m: cm, vocab: C.llama_model_get_vocab(cm), path: path, vocabOnly: p.VocabOnly}
	m.nVocab = int(C.llama_vocab_n_tokens(m.vocab))
	m.nCtxTrain = int(C.llama_model_n_ctx_train(cm))
	// llama.cpp aborts when asked for the heads of a model without layers (a vocabulary
	// alone).
	if layers := int(C.llama_model_n_layer(cm)); layers > 0 && !p.VocabOnly {
		m.shape = Shape{
			Layers:  layers,
			Heads:   int(C.llama_model_n_head(cm)),
			KVHeads: int(C.llama_model_n_head_kv(cm)),
			Embd:    int(C.llama_model_n_embd(cm)),
		}
	}
	m.bos = Token(C.llama_vocab_bos(m.vocab))
	m.eos = Token(C.llama_vocab_eos(m.vocab))
	m.eot = Token(C.llama_vocab_eot(m.vocab))
	m.nl = Token(C.llama_vocab_nl(m.vocab))
	m.addBOS = bool(C.llama_vocab_get_add_bos(m.vocab))
	var buf [256]C.char
	if n := C.llama_model_desc(cm, &buf[0], C.size_t(len(buf))); n > 0 {
		m.desc = C.GoString(&buf[0])
	}
	return m, nil
}

// Close releases the model. Contexts still open keep the weights alive until they are
// closed; the Model's own methods fail with ErrClosed from now on. Close is idempotent.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.freeLocked()
	return nil
}

func (m *Model) freeLocked() {
	if m.closed && m.contexts == 0 && m.m != nil {
		C.llama_model_free(m.m)
		m.m, m.vocab = nil, nil
	}
}

// acquire registers a new context that needs the C model.
func (m *Model) acquire() (*C.struct_llama_model, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("llama: new context: model: %w", ErrClosed)
	}
	m.contexts++
	return m.m, nil
}

// release is called by a context's Close.
func (m *Model) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.contexts--
	m.freeLocked()
}

// Path returns the file the model was loaded from.
func (m *Model) Path() string { return m.path }

// Description returns llama.cpp's one-line description (architecture, size, type).
func (m *Model) Description() string { return m.desc }

// VocabSize returns the number of tokens in the vocabulary.
func (m *Model) VocabSize() int { return m.nVocab }

// ContextTrainSize returns the context length the model was trained with.
func (m *Model) ContextTrainSize() int { return m.nCtxTrain }

// Shape is what of a model's architecture sizes its KV cache.
type Shape struct {
	// Layers, Heads and KVHeads are the transformer's layers, attention heads and
	// key/value heads (fewer than Heads with grouped-query attention); Embd is its
	// embedding length.
	Layers, Heads, KVHeads, Embd int
}

// KVBytesPerToken estimates the KV cache's bytes per token of context: a key and a
// value of KVHeads heads of Embd/Heads dimensions in every layer, in llama.cpp's default
// cache type (f16, 2 bytes). 0 when the shape is unknown.
func (s Shape) KVBytesPerToken() int64 {
	if s.Layers <= 0 || s.Heads <= 0 || s.KVHeads <= 0 || s.Embd <= 0 {
		return 0
	}
	headDim := int64(s.Embd / s.Heads)
	return 2 * int64(s.Layers) * int64(s.KVHeads) * headDim * 2
}

// Shape returns the model's shape, as its metadata gives it (zero for a vocabulary
// loaded alone).
func (m *Model) Shape() Shape { return m.shape }

// BOS returns the beginning-of-sequence token, or NoToken.
func (m *Model) BOS() Token { return m.bos }

// EOS returns the end-of-sequence token, or NoToken.
func (m *Model) EOS() Token { return m.eos }

// EOT returns the end-of-turn token, or NoToken.
func (m *Model) EOT() Token { return m.eot }

// NL returns the newline token, or NoToken.
func (m *Model) NL() Token { return m.nl }

// AddsBOS reports whether tokenizing with addSpecial puts BOS in front.
func (m *Model) AddsBOS() bool { return m.addBOS }

// IsEOG reports whether t ends generation (EOS, EOT and the model's other end tokens).
func (m *Model) IsEOG(t Token) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.vocab == nil || m.closed {
		return false
	}
	return bool(C.llama_vocab_is_eog(m.vocab, C.llama_token(t)))
}

// IsControl reports whether t is a control token (rendered as nothing by TokenToPiece).
func (m *Model) IsControl(t Token) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.vocab == nil || m.closed {
		return false
	}
	return bool(C.llama_vocab_is_control(m.vocab, C.llama_token(t)))
}

// ChatTemplate returns the model's built-in chat template (Jinja source), or "".
func (m *Model) ChatTemplate() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.m == nil || m.closed {
		return ""
	}
	if t := C.llama_model_chat_template(m.m, nil); t != nil {
		return C.GoString(t)
	}
	return ""
}

// Meta returns a GGUF metadata value as a string.
func (m *Model) Meta(key string) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.m == nil || m.closed {
		return "", false
	}
	ckey := C.CString(key)
	defer C.free(unsafe.Pointer(ckey))
	buf := make([]byte, 256)
	for {
		n := int(C.llama_model_meta_val_str(m.m, ckey, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf))))
		if n < 0 {
			return "", false
		}
		if n < len(buf) {
			return string(buf[:n]), true
		}
		buf = make([]byte, n+1)
	}
}

// cstr returns a C view of s for the duration of a call (never nil, even for "", because
// llama.cpp builds a std::string from the pointer).
func cstr(s string) *C.char {
	if len(s) == 0 {
		return (*C.char)(unsafe.Pointer(&make([]byte, 1)[0]))
	}
	return (*C.char)(unsafe.Pointer(unsafe.StringData(s)))
}

// Tokenize turns text into tokens. addSpecial adds BOS/EOS as the model is configured to;
// parseSpecial turns the text of special tokens (like "<|im_end|>") into those tokens
// instead of tokenizing it as plain text.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]Token, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, fmt.Errorf("llama: tokenize: %w", ErrClosed)
	}
	if len(text) > 1<<30 {
		return nil, fmt.Errorf("llama: tokenize: text of %d bytes is too long", len(text))
	}
	// A token covers at least one byte, plus room for BOS and EOS.
	toks := make([]Token, len(text)+2)
	for {
		n := C.llama_tokenize(m.vocab, cstr(text), C.int32_t(len(text)),
			(*C.llama_token)(unsafe.Pointer(&toks[0])), C.int32_t(len(toks)),
			C.bool(addSpecial), C.bool(parseSpecial))
		switch {
		case n == C.INT32_MIN:
			return nil, fmt.Errorf("llama: tokenize: too many tokens")
		case n < 0:
			toks = make([]Token, int(-n))
		default:
			return toks[:n:n], nil
		}
	}
}

// CountTokens returns how many tokens text takes in a prompt: len(Tokenize(text, true, true)).
func (m *Model) CountTokens(text string) (int, error) {
	toks, err := m.Tokenize(text, true, true)
	return len(toks), err
}

// TokenToPiece returns the text of one token as it appears in generated text. Control
// tokens render as "". A piece can be part of a multi-byte UTF-8 character (byte-fallback
// tokens), so concatenate pieces before treating them as text. After Close it returns "".
func (m *Model) TokenToPiece(t Token) string {
	var small [64]byte
	return string(m.AppendPiece(small[:0], t))
}

// AppendPiece appends the piece of t to dst, without allocating when dst has room.
func (m *Model) AppendPiece(dst []byte, t Token) []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return dst
	}
	if cap(dst)-len(dst) < 16 {
		dst = append(make([]byte, 0, len(dst)+64), dst...)
	}
	for {
		free := dst[len(dst):cap(dst)]
		n := int(C.llama_token_to_piece(m.vocab, C.llama_token(t),
			(*C.char)(unsafe.Pointer(&free[0])), C.int32_t(len(free)), 0, false))
		if n >= 0 {
			return dst[:len(dst)+n]
		}
		dst = append(make([]byte, 0, len(dst)-n+16), dst...)
	}
}

// Detokenize turns tokens back into text (special tokens are not rendered).
func (m *Model) Detokenize(tokens []Token) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return "", fmt.Errorf("llama: detokenize: %w", ErrClosed)
	}
	if len(tokens) == 0 {
		return "", nil
	}
	buf := make([]byte, len(tokens)*8+16)
	for {
		n := int(C.llama_detokenize(m.vocab, (*C.llama_token)(unsafe.Pointer(&tokens[0])), C.int32_t(len(tokens)),
			(*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(len(buf)), false, false))
		if n >= 0 {
			return string(buf[:n]), nil
		}
		buf = make([]byte, -n)
	}
}
