package llama

/*
#cgo pkg-config: llama
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
)

// RandomSeed asks for a different random seed on every sampler (LLAMA_DEFAULT_SEED).
const RandomSeed = 0xFFFFFFFF

// SamplerParams configures a sampler chain. The zero value is greedy decoding (always the
// most likely token), which is deterministic.
type SamplerParams struct {
	// Temperature scales the logits; 0 (or less) means greedy, without randomness.
	Temperature float32
	// TopK keeps the K most likely tokens (0: off).
	TopK int
	// TopP keeps the smallest set of tokens whose probabilities add up to P (0 or 1: off).
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely one (0: off).
	MinP float32
	// RepeatPenalty divides the logits of recently seen tokens (0 or 1: off).
	RepeatPenalty float32
	// FrequencyPenalty and PresencePenalty subtract from the logits of recently seen
	// tokens by count and by presence (0: off).
	FrequencyPenalty, PresencePenalty float32
	// RepeatLastN is how many recent tokens the penalties look at (0: 64; -1: all
	// accepted tokens up to the context length).
	RepeatLastN int
	// VocabSize is the model's vocabulary size (Model.VocabSize); needed only with a
	// penalty.
	VocabSize int
	// Seed seeds the random choice when Temperature > 0. The same seed gives the same
	// choices; RandomSeed picks a new one.
	Seed uint32
}

// Greedy reports whether p picks the most likely token.
func (p SamplerParams) Greedy() bool { return p.Temperature <= 0 }

func (p SamplerParams) penalised() bool {
	return (p.RepeatPenalty > 0 && p.RepeatPenalty != 1) || p.FrequencyPenalty != 0 || p.PresencePenalty != 0
}

// Sampler is a llama.cpp sampler chain. Its methods are serialised; a sampler carries the
// history its penalties look at, so use one per generation stream.
type Sampler struct {
	mu sync.Mutex
	s  *C.struct_llama_sampler
	p  SamplerParams
	// argmax: plain greedy, which needs no history; Sample takes the largest logit
	// directly instead of going through the chain.
	argmax bool
}

// NewSampler builds the chain penalties → top-k → top-p → min-p → temperature → random
// choice (or penalties → greedy), the order llama.cpp's tools use.
func NewSampler(p SamplerParams) (*Sampler, error) {
	if p.TopK < 0 || p.TopP < 0 || p.TopP > 1 || p.MinP < 0 || p.MinP > 1 || p.RepeatPenalty < 0 || p.RepeatLastN < -1 {
		return nil, fmt.Errorf("llama: new sampler: parameter out of range in %+v", p)
	}
	if p.penalised() && p.VocabSize <= 0 {
		return nil, fmt.Errorf("llama: new sampler: penalties need VocabSize")
	}
	cp := C.llama_sampler_chain_default_params()
	cp.no_perf = true
	chain := C.llama_sampler_chain_init(cp)
	if chain == nil {
		return nil, fmt.Errorf("llama: new sampler: out of memory")
	}
	if p.penalised() {
		lastN := p.RepeatLastN
		if lastN == 0 {
			lastN = 64
		}
		repeat := p.RepeatPenalty
		if repeat <= 0 {
			repeat = 1
		}
		C.llama_sampler_chain_add(chain, C.llama_sampler_init_penalties(C.int32_t(p.VocabSize), C.int32_t(lastN),
			C.float(repeat), C.float(p.FrequencyPenalty), C.float(p.PresencePenalty)))
	}
	if p.Greedy() {
		C.llama_sampler_chain_add(chain, C.llama_sampler_init_greedy())
	} else {
		if p.TopK > 0 {
			C.llama_sampler_chain_add(chain, C.llama_sampler_init_top_k(C.int32_t(p.TopK)))
		}
		if p.TopP > 0 && p.TopP < 1 {
			C.llama_sampler_chain_add(chain, C.llama_sampler_init_top_p(C.float(p.TopP), 1))
		}
		if p.MinP > 0 {
			C.llama_sampler_chain_add(chain, C.llama_sampler_init_min_p(C.float(p.MinP), 1))
		}
		C.llama_sampler_chain_add(chain, C.llama_sampler_init_temp(C.float(p.Temperature)))
		C.llama_sampler_chain_add(chain, C.llama_sampler_init_dist(C.uint32_t(p.Seed)))
	}
	return &Sampler{s: chain, p: p, argmax: p.Greedy() && !p.penalised()}, nil
}

// Params returns the parameters the sampler was built with.
func (s *Sampler) Params() SamplerParams { return s.p }

// Sample picks the next token from output idx of c's last decode (-1: the last output)
// and accepts it into the sampler's history, as llama_sampler_sample does.
func (s *Sampler) Sample(c *Context, idx int) (Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s == nil {
		return NoToken, fmt.Errorf("llama: sample: sampler: %w", ErrClosed)
	}
	if err := c.lock("sample"); err != nil {
		return NoToken, err
	}
	defer c.mu.Unlock()
	if s.argmax {
		t := Token(C.parley_argmax(c.c, C.int32_t(idx), C.int32_t(c.nVocab)))
		if t == NoToken {
			return NoToken, fmt.Errorf("llama: sample: no output %d in the last decode", idx)
		}
		return t, nil
	}
	// llama_sampler_sample asserts (aborting the process) when there are no logits; ask first.
	if C.llama_get_logits_ith(c.c, C.int32_t(idx)) == nil {
		return NoToken, fmt.Errorf("llama: sample: no output %d in the last decode", idx)
	}
	return Token(C.llama_sampler_sample(s.s, c.c, C.int32_t(idx))), nil
}

// Accept adds t to the sampler's history without sampling (for example the prompt's
// tokens, so that repetition penalties see them).
func (s *Sampler) Accept(t Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s != nil {
		C.llama_sampler_accept(s.s, C.llama_token(t))
	}
}

// Reset forgets the history and restarts the random sequence from the seed.
func (s *Sampler) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s != nil {
		C.llama_sampler_reset(s.s)
	}
}

// Close frees the sampler. Close is idempotent.
func (s *Sampler) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s != nil {
		C.llama_sampler_free(s.s)
		s.s = nil
	}
	return nil
}
