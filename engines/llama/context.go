package llama

/*
#cgo pkg-config: llama
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/parley-voice/parley/internal/regularfile"
)

// SeqID names a sequence in a context's memory (KV cache). Single-stream use needs only 0.
type SeqID int32

// Errors of Decode. Every decode error wraps ErrDecode.
var (
	ErrDecode = errors.New("llama: decode failed")
	// ErrNoKVSlot means the batch does not fit in the context's memory: the context is full.
	ErrNoKVSlot = fmt.Errorf("%w: no free KV cache slot (the context is full)", ErrDecode)
	// ErrAborted means the decode was cancelled through its context.Context. The error
	// also wraps the context's cause (context.Canceled, context.DeadlineExceeded).
	ErrAborted = fmt.Errorf("%w: aborted", ErrDecode)
)

// FlashAttention selects flash attention.
type FlashAttention int

// Flash attention settings. The zero value lets llama.cpp decide, as its tools do.
const (
	FlashAttentionAuto FlashAttention = iota
	FlashAttentionOff
	FlashAttentionOn
)

// ContextParams configures NewContext. Zero fields take the documented defaults.
type ContextParams struct {
	// NCtx is the context length in tokens (0: the model's training context).
	NCtx int
	// NBatch is the most tokens one Decode call takes (0: min(NCtx, 512)). DecodeTokens
	// splits longer inputs itself.
	NBatch int
	// NUBatch is the physical batch size (0: NBatch).
	NUBatch int
	// Threads is the number of threads for generating one token at a time (0: half the
	// logical CPUs, at least 1: roughly the physical cores, which is what llama.cpp's
	// tools use too; hyper-threads and oversubscribed cores slow token generation down,
	// and the agent's other models need CPU as well).
	Threads int
	// ThreadsBatch is the number of threads for prompt batches (0: Threads).
	ThreadsBatch int
	// BatchThreadsFrom is the smallest batch that ThreadsBatch threads decode; smaller
	// ones take Threads (0: DefaultBatchThreadsFrom, 1: every batch).
	BatchThreadsFrom int
	// SeqMax is the number of sequences the memory holds (0: 1).
	SeqMax int
	// FlashAttention selects flash attention (default: auto).
	FlashAttention FlashAttention
}

// DefaultBatchThreadsFrom is BatchThreadsFrom's default. A batch of a few tokens costs
// about what one token does per token, bound by reading the weights rather than by
// compute: a second thread makes it little faster and costs nearly twice the CPU time
// (with Qwen2.5-0.5B's shape on 2 cores, 5 tokens take 71 ms on 2 threads for 131 ms of
// CPU, 85 ms on 1; 16 tokens 167 ms against 238 ms; docs/PERFORMANCE.md). An agent's
// batches are mostly that short (a word or two of the user's, the reply's opening).
const DefaultBatchThreadsFrom = 8

// Context is an inference context: the KV cache (memory) of one or more sequences and
// the logits of the last decode. Its methods may be called from any goroutine but are
// serialised; a decode can be cancelled from another goroutine through the
// context.Context passed to it.
type Context struct {
	mu    sync.Mutex
	c     *C.struct_llama_context
	model *Model
	batch C.struct_llama_batch // reused by DecodeTokens, capacity nBatch, one sequence

	// Cancellation: decodes run under an abort ticket; a cancelled context.Context
	// requests its ticket's abort. One watcher serves consecutive decodes under the same
	// context (a whole generation), because registering one per token costs a few
	// percent of a small model's decode time.
	ticket      int64
	watchedDone <-chan struct{}
	stopWatch   func() bool

	// Persistent CPU threadpools for single tokens and for batches (the same pool when
	// the thread counts are equal); nil when the backend offers none.
	pool, poolBatch *C.struct_ggml_threadpool

	// abortMu guards abort's lifetime only: a cancellation callback of a finished decode
	// may still run while (or after) the context closes.
	abortMu sync.Mutex
	abort   *C.parley_abort

	nCtx, nBatch, nVocab, seqMax int

	// threads, threadsBatch and batchThreadsFrom are ContextParams'; batchThreads is the
	// thread count llama.cpp has for batches now.
	threads, threadsBatch, batchThreadsFrom, batchThreads int
}

// NewContext makes a context for m. Close it before (or after) closing the model.
func NewContext(m *Model, p ContextParams) (*Context, error) {
	if m.vocabOnly {
		return nil, errors.New("llama: new context: the model was loaded with VocabOnly")
	}
	if p.NCtx < 0 || p.NBatch < 0 || p.NUBatch < 0 || p.Threads < 0 || p.ThreadsBatch < 0 || p.BatchThreadsFrom < 0 || p.SeqMax < 0 {
		return nil, fmt.Errorf("llama: new context: negative parameter in %+v", p)
	}
	if p.NCtx == 0 {
		p.NCtx = m.nCtxTrain
	}
	if p.NBatch == 0 {
		p.NBatch = min(p.NCtx, 512)
	}
	if p.NUBatch == 0 || p.NUBatch > p.NBatch {
		p.NUBatch = p.NBatch
	}
	if p.Threads == 0 {
		p.Threads = max(1, runtime.NumCPU()/2)
	}
	if p.ThreadsBatch == 0 {
		p.ThreadsBatch = p.Threads
	}
	if p.BatchThreadsFrom == 0 {
		p.BatchThreadsFrom = DefaultBatchThreadsFrom
	}
	if p.SeqMax == 0 {
		p.SeqMax = 1
	}
	params := C.llama_context_default_params()
	params.n_ctx = C.uint32_t(p.NCtx)
	params.n_batch = C.uint32_t(p.NBatch)
	params.n_ubatch = C.uint32_t(p.NUBatch)
	params.n_threads = C.int32_t(p.Threads)
	params.n_threads_batch = C.int32_t(p.ThreadsBatch)
	params.n_seq_max = C.uint32_t(p.SeqMax)
	switch p.FlashAttention {
	case FlashAttentionOff:
		params.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_DISABLED
	case FlashAttentionOn:
		params.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED
	default:
		params.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_AUTO
	}
	params.no_perf = false

	cm, err := m.acquire()
	if err != nil {
		return nil, err
	}
	cc := C.llama_init_from_model(cm, params)
	if cc == nil {
		m.release()
		return nil, fmt.Errorf("llama: new context (n_ctx %d) failed: out of memory or unsupported parameters", p.NCtx)
	}
	c := &Context{
		c:      cc,
		model:  m,
		nCtx:   int(C.llama_n_ctx(cc)),
		nBatch: int(C.llama_n_batch(cc)),
		nVocab: m.nVocab,
		seqMax: p.SeqMax,

		threads:          p.Threads,
		threadsBatch:     p.ThreadsBatch,
		batchThreadsFrom: p.BatchThreadsFrom,
		batchThreads:     p.ThreadsBatch,
	}
	c.batch = C.llama_batch_init(C.int32_t(c.nBatch), 0, 1)
	c.abort = (*C.parley_abort)(C.calloc(1, C.size_t(unsafe.Sizeof(C.parley_abort{}))))
	C.parley_abort_install(cc, c.abort)
	c.pool = C.parley_threadpool_new(C.int(p.Threads))
	c.poolBatch = c.pool
	if p.ThreadsBatch != p.Threads {
		c.poolBatch = C.parley_threadpool_new(C.int(p.ThreadsBatch))
	}
	if c.pool != nil && c.poolBatch != nil {
		C.llama_attach_threadpool(cc, c.pool, c.poolBatch)
	}
	return c, nil
}

// Close frees the context. It waits for a decode in progress. Close is idempotent.
func (c *Context) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.c == nil {
		return nil
	}
	if c.stopWatch != nil {
		c.stopWatch()
		c.stopWatch = nil
	}
	C.llama_free(c.c)
	C.llama_batch_free(c.batch)
	if c.poolBatch != c.pool {
		C.parley_threadpool_free(c.poolBatch)
	}
	C.parley_threadpool_free(c.pool)
	c.pool, c.poolBatch = nil, nil
	c.c = nil
	c.abortMu.Lock()
	C.free(unsafe.Pointer(c.abort))
	c.abort = nil
	c.abortMu.Unlock()
	c.model.release()
	return nil
}

// lock locks the context and reports ErrClosed after Close.
func (c *Context) lock(op string) error {
	c.mu.Lock()
	if c.c == nil {
		c.mu.Unlock()
		return fmt.Errorf("llama: %s: context: %w", op, ErrClosed)
	}
	return nil
}

// Model returns the model the context was made from.
func (c *Context) Model() *Model { return c.model }

// NCtx returns the context length in tokens.
func (c *Context) NCtx() int { return c.nCtx }

// NBatch returns the most tokens one Decode takes.
func (c *Context) NBatch() int { return c.nBatch }

// SeqMax returns the number of sequences the memory holds.
func (c *Context) SeqMax() int { return c.seqMax }

// Threads returns the thread count for single-token decoding.
func (c *Context) Threads() int {
	if c.lock("threads") != nil {
		return 0
	}
	defer c.mu.Unlock()
	return int(C.llama_n_threads(c.c))
}

// abortOn makes the cancellation of ctx abort the decodes that follow. c.mu is held.
func (c *Context) abortOn(ctx context.Context) {
	done := ctx.Done()
	if c.ticket != 0 && done == c.watchedDone {
		return // the same context as the last decode: its watcher still stands
	}
	if c.stopWatch != nil {
		c.stopWatch()
		c.stopWatch = nil
	}
	// A new ticket: a watcher of an earlier context that fires late requests an old
	// ticket and aborts nothing.
	c.ticket++
	ticket := C.int64_t(c.ticket)
	C.parley_abort_begin(c.abort, ticket)
	c.watchedDone = done
	if done == nil {
		return // never cancelled
	}
	c.stopWatch = context.AfterFunc(ctx, func() {
		c.abortMu.Lock()
		defer c.abortMu.Unlock()
		if c.abort != nil {
			C.parley_abort_request(c.abort, ticket)
		}
	})
}

// setBatchThreads gives a batch of n tokens its threads (BatchThreadsFrom). llama.cpp
// decodes a single token with Threads whatever it is told for batches. c.mu is held.
func (c *Context) setBatchThreads(n int) {
	want := c.threadsBatch
	if n < c.batchThreadsFrom {
		want = c.threads
	}
	if want != c.batchThreads {
		C.llama_set_n_threads(c.c, C.int32_t(c.threads), C.int32_t(want))
		c.batchThreads = want
	}
}

// decodeLocked runs llama_decode on b, aborting it when ctx is done. c.mu is held.
func (c *Context) decodeLocked(ctx context.Context, b C.struct_llama_batch) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
	}
	c.abortOn(ctx)
	c.setBatchThreads(int(b.n_tokens))
	rc := C.llama_decode(c.c, b)
	switch {
	case rc == 0:
		return nil
	case rc == 1:
		return ErrNoKVSlot
	case rc == 2:
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrAborted, context.Cause(ctx))
		}
		return ErrAborted
	case rc == -1:
		return fmt.Errorf("%w: invalid batch", ErrDecode)
	case rc < -1:
		return fmt.Errorf("%w: fatal error %d (the sequence's memory may hold part of the batch)", ErrDecode, int(rc))
	default:
		return fmt.Errorf("%w: warning code %d", ErrDecode, int(rc))
	}
}

// DecodeTokens evaluates tokens as sequence seq at positions pos, pos+1, ..., in chunks
// of at most NBatch, and keeps the logits of the last token (Logits(-1)). When ctx is
// cancelled the decode stops inside the chunk it is in and the error wraps ErrAborted;
// the sequence's memory may then hold part of the tokens (see SeqPosMax).
func (c *Context) DecodeTokens(ctx context.Context, seq SeqID, pos int, tokens []Token) error {
	return c.decodeTokens(ctx, seq, pos, tokens, -1)
}

// DecodeTokensKeeping is DecodeTokens that also keeps the logits of tokens[keep], which
// must lie before the last token, in the last chunk of NBatch tokens: Logits(-2) returns
// them, Logits(-1) the last token's. One pass over the weights then gives what two would:
// a prompt's logits and those of the text that follows it.
func (c *Context) DecodeTokensKeeping(ctx context.Context, seq SeqID, pos int, tokens []Token, keep int) error {
	if keep < 0 || keep >= len(tokens)-1 {
		return fmt.Errorf("%w: keep the logits of token %d of %d", ErrDecode, keep, len(tokens))
	}
	if last := (len(tokens) - 1) / c.nBatch * c.nBatch; keep < last {
		return fmt.Errorf("%w: token %d is not in the last chunk of %d tokens (from %d)", ErrDecode, keep, c.nBatch, last)
	}
	return c.decodeTokens(ctx, seq, pos, tokens, keep)
}

// decodeTokens is DecodeTokens, keeping also the logits of tokens[keep] when keep >= 0.
func (c *Context) decodeTokens(ctx context.Context, seq SeqID, pos int, tokens []Token, keep int) error {
	if len(tokens) == 0 {
		return nil
	}
	if err := c.lock("decode"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if pos < 0 || pos+len(tokens) > c.nCtx {
		return fmt.Errorf("%w: positions %d..%d do not fit the context of %d tokens", ErrNoKVSlot, pos, pos+len(tokens)-1, c.nCtx)
	}
	if int(seq) < 0 || int(seq) >= c.seqMax {
		return fmt.Errorf("%w: sequence %d out of range (SeqMax %d)", ErrDecode, seq, c.seqMax)
	}
	tok := unsafe.Slice(c.batch.token, c.nBatch)
	position := unsafe.Slice(c.batch.pos, c.nBatch)
	nSeq := unsafe.Slice(c.batch.n_seq_id, c.nBatch)
	seqIDs := unsafe.Slice(c.batch.seq_id, c.nBatch)
	logits := unsafe.Slice(c.batch.logits, c.nBatch)
	for start := 0; start < len(tokens); start += c.nBatch {
		chunk := tokens[start:min(start+c.nBatch, len(tokens))]
		for i, t := range chunk {
			tok[i] = C.llama_token(t)
			position[i] = C.llama_pos(pos + start + i)
			nSeq[i] = 1
			*seqIDs[i] = C.llama_seq_id(seq)
			logits[i] = 0
			if start+i == keep {
				logits[i] = 1
			}
		}
		last := start+len(chunk) == len(tokens)
		if last {
			logits[len(chunk)-1] = 1
		}
		c.batch.n_tokens = C.int32_t(len(chunk))
		if err := c.decodeLocked(ctx, c.batch); err != nil {
			return err
		}
	}
	return nil
}

// Decode evaluates a batch built by the caller. Logits(i) then returns the logits of the
// batch's i-th token, for tokens added with logits set.
func (c *Context) Decode(ctx context.Context, b *Batch) error {
	if b.closed {
		return fmt.Errorf("llama: decode: batch: %w", ErrClosed)
	}
	if b.n == 0 {
		return nil
	}
	if err := c.lock("decode"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return c.decodeLocked(ctx, b.b)
}

// Logits returns a copy of the logits of the last decode's i-th token of its batch,
// which must have asked for them (negative i counts outputs from the last: -1 is the
// last).
func (c *Context) Logits(i int) ([]float32, error) {
	if err := c.lock("logits"); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	p := C.llama_get_logits_ith(c.c, C.int32_t(i))
	if p == nil {
		return nil, fmt.Errorf("llama: logits: no output %d in the last decode", i)
	}
	out := make([]float32, c.nVocab)
	copy(out, unsafe.Slice((*float32)(unsafe.Pointer(p)), c.nVocab))
	return out, nil
}

func (c *Context) memory() C.llama_memory_t { return C.llama_get_memory(c.c) }

// ErrSeqRemove means the memory cannot remove part of a sequence (recurrent models);
// clear the whole sequence instead.
var ErrSeqRemove = errors.New("llama: the model's memory cannot remove part of a sequence")

// SeqRemove removes positions [p0, p1) of sequence seq from memory. Negative p0 means
// from the start, negative p1 to the end; a negative seq means every sequence.
func (c *Context) SeqRemove(seq SeqID, p0, p1 int) error {
	if err := c.lock("seq remove"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if !C.llama_memory_seq_rm(c.memory(), C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1)) {
		return ErrSeqRemove
	}
	return nil
}

// SeqCopy makes positions [p0, p1) of src also belong to dst (without copying data).
func (c *Context) SeqCopy(src, dst SeqID, p0, p1 int) error {
	if err := c.lock("seq copy"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	C.llama_memory_seq_cp(c.memory(), C.llama_seq_id(src), C.llama_seq_id(dst), C.llama_pos(p0), C.llama_pos(p1))
	return nil
}

// SeqShift adds delta to the positions [p0, p1) of seq (context shifting). It needs a
// memory that can shift (CanShift).
func (c *Context) SeqShift(seq SeqID, p0, p1, delta int) error {
	if err := c.lock("seq shift"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if !C.llama_memory_can_shift(c.memory()) {
		return errors.New("llama: seq shift: the model's memory cannot shift positions")
	}
	C.llama_memory_seq_add(c.memory(), C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1), C.llama_pos(delta))
	return nil
}

// SeqPosMax returns the largest position of seq in memory, or -1 when it is empty or
// the context is closed.
func (c *Context) SeqPosMax(seq SeqID) int {
	if c.lock("seq pos max") != nil {
		return -1
	}
	defer c.mu.Unlock()
	return int(C.llama_memory_seq_pos_max(c.memory(), C.llama_seq_id(seq)))
}

// SeqPosMin returns the smallest position of seq in memory, or -1 when it is empty.
func (c *Context) SeqPosMin(seq SeqID) int {
	if c.lock("seq pos min") != nil {
		return -1
	}
	defer c.mu.Unlock()
	return int(C.llama_memory_seq_pos_min(c.memory(), C.llama_seq_id(seq)))
}

// Clear empties the memory of every sequence.
func (c *Context) Clear() error {
	if err := c.lock("clear"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	C.llama_memory_clear(c.memory(), true)
	return nil
}

// SeqStateSize returns the size in bytes of SaveSeqState's result for seq.
func (c *Context) SeqStateSize(seq SeqID) int {
	if c.lock("seq state size") != nil {
		return 0
	}
	defer c.mu.Unlock()
	return int(C.llama_state_seq_get_size(c.c, C.llama_seq_id(seq)))
}

// SaveSeqState returns the memory (KV cache) of seq as bytes, to restore later with
// LoadSeqState into a context of the same model.
func (c *Context) SaveSeqState(seq SeqID) ([]byte, error) {
	if err := c.lock("save seq state"); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	size := int(C.llama_state_seq_get_size(c.c, C.llama_seq_id(seq)))
	if size == 0 {
		return nil, fmt.Errorf("llama: save seq state: sequence %d has no state", seq)
	}
	buf := make([]byte, size)
	n := int(C.llama_state_seq_get_data(c.c, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(size), C.llama_seq_id(seq)))
	if n == 0 {
		return nil, fmt.Errorf("llama: save seq state of sequence %d failed", seq)
	}
	return buf[:n], nil
}

// LoadSeqState replaces the memory of seq with data from SaveSeqState.
func (c *Context) LoadSeqState(seq SeqID, data []byte) error {
	if len(data) == 0 {
		return errors.New("llama: load seq state: no data")
	}
	if err := c.lock("load seq state"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	n := C.llama_state_seq_set_data(c.c, (*C.uint8_t)(unsafe.Pointer(&data[0])), C.size_t(len(data)), C.llama_seq_id(seq))
	if n == 0 {
		return fmt.Errorf("llama: load seq state into sequence %d failed (state from another model or context size?)", seq)
	}
	return nil
}

// SaveSeqStateFile writes the memory of seq and the tokens it holds to a file.
func (c *Context) SaveSeqStateFile(path string, seq SeqID, tokens []Token) error {
	if err := c.lock("save seq state file"); err != nil {
		return err
	}
	defer c.mu.Unlock()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var tp *C.llama_token
	if len(tokens) > 0 {
		tp = (*C.llama_token)(unsafe.Pointer(&tokens[0]))
	}
	if C.llama_state_seq_save_file(c.c, cpath, C.llama_seq_id(seq), tp, C.size_t(len(tokens))) == 0 {
		return fmt.Errorf("llama: save seq state to %s failed", path)
	}
	return nil
}

// LoadSeqStateFile restores the memory of seq from a file written by SaveSeqStateFile
// and returns the tokens saved with it (at most maxTokens).
func (c *Context) LoadSeqStateFile(path string, seq SeqID, maxTokens int) ([]Token, error) {
	if err := regularfile.Check(path); err != nil {
		return nil, fmt.Errorf("llama: load seq state: %w", err)
	}
	if err := c.lock("load seq state file"); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	toks := make([]Token, max(maxTokens, 1))
	var n C.size_t
	if C.llama_state_seq_load_file(c.c, cpath, C.llama_seq_id(seq), (*C.llama_token)(unsafe.Pointer(&toks[0])), C.size_t(maxTokens), &n) == 0 {
		return nil, fmt.Errorf("llama: load seq state from %s failed (another model, too many tokens or a damaged file)", path)
	}
	return toks[:n:n], nil
}

// Perf holds llama.cpp's own timing counters of a context.
type Perf struct {
	PromptEvalMS float64
	EvalMS       float64
	PromptTokens int
	EvalTokens   int
}

// Perf returns the context's timing counters since creation or ResetPerf.
func (c *Context) Perf() Perf {
	if c.lock("perf") != nil {
		return Perf{}
	}
	defer c.mu.Unlock()
	d := C.llama_perf_context(c.c)
	return Perf{PromptEvalMS: float64(d.t_p_eval_ms), EvalMS: float64(d.t_eval_ms), PromptTokens: int(d.n_p_eval), EvalTokens: int(d.n_eval)}
}

// ResetPerf zeroes the timing counters.
func (c *Context) ResetPerf() {
	if c.lock("reset perf") != nil {
		return
	}
	defer c.mu.Unlock()
	C.llama_perf_context_reset(c.c)
}

// Batch is a batch of tokens for Decode, allocated in C memory. It is not safe for
// concurrent use.
type Batch struct {
	b      C.struct_llama_batch
	cap    int
	seqMax int
	n      int
	closed bool
}

// NewBatch allocates a batch of up to capacity tokens, each in up to seqMax sequences.
func NewBatch(capacity, seqMax int) (*Batch, error) {
	if capacity <= 0 || seqMax <= 0 {
		return nil, fmt.Errorf("llama: new batch: capacity %d and seqMax %d must be positive", capacity, seqMax)
	}
	return &Batch{b: C.llama_batch_init(C.int32_t(capacity), 0, C.int32_t(seqMax)), cap: capacity, seqMax: seqMax}, nil
}

// Add appends token t at position pos of the given sequences; logits asks for its
// output (logits) after Decode.
func (b *Batch) Add(t Token, pos int, logits bool, seqs ...SeqID) error {
	switch {
	case b.closed:
		return fmt.Errorf("llama: batch add: %w", ErrClosed)
	case b.n >= b.cap:
		return fmt.Errorf("llama: batch add: batch full (%d tokens)", b.cap)
	case len(seqs) == 0 || len(seqs) > b.seqMax:
		return fmt.Errorf("llama: batch add: %d sequences (1..%d allowed)", len(seqs), b.seqMax)
	}
	i := b.n
	unsafe.Slice(b.b.token, b.cap)[i] = C.llama_token(t)
	unsafe.Slice(b.b.pos, b.cap)[i] = C.llama_pos(pos)
	unsafe.Slice(b.b.n_seq_id, b.cap)[i] = C.int32_t(len(seqs))
	ids := unsafe.Slice(unsafe.Slice(b.b.seq_id, b.cap)[i], b.seqMax)
	for j, s := range seqs {
		ids[j] = C.llama_seq_id(s)
	}
	var l C.int8_t
	if logits {
		l = 1
	}
	unsafe.Slice(b.b.logits, b.cap)[i] = l
	b.n++
	b.b.n_tokens = C.int32_t(b.n)
	return nil
}

// Len returns the number of tokens in the batch.
func (b *Batch) Len() int { return b.n }

// Cap returns the batch's capacity.
func (b *Batch) Cap() int { return b.cap }

// Clear empties the batch for reuse.
func (b *Batch) Clear() {
	b.n = 0
	b.b.n_tokens = 0
}

// Close frees the batch. Close is idempotent.
func (b *Batch) Close() error {
	if !b.closed {
		b.closed = true
		C.llama_batch_free(b.b)
	}
	return nil
}
