package whisper

/*
#include <stdlib.h>
#include <whisper.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/parley-voice/parley/internal/regularfile"
)

// SampleRate is the only sample rate libwhisper's models (Silero VAD included) accept.
const SampleRate = C.WHISPER_SAMPLE_RATE

// VADWindow is the number of samples Silero VAD scores at a time at 16 kHz (32 ms):
// every probability Probs returns covers one window.
const VADWindow = 512

// VADParams configures a Silero VAD context.
type VADParams struct {
	// Threads is the number of CPU threads per window (1 when zero). Silero is small:
	// more threads mostly add synchronisation cost.
	Threads int
	// UseGPU lets libwhisper run the model on a GPU backend when one is loaded.
	UseGPU bool
}

// VAD runs Silero voice activity detection through libwhisper, one 512-sample window at
// a time, keeping the model's LSTM state between calls so that audio can be fed as it
// arrives. A VAD is not safe for concurrent use: one goroutine owns it.
type VAD struct {
	ctx *C.struct_whisper_vad_context
	// rest holds the samples of an incomplete window until the next call completes it.
	rest []float32
	// scratch is where complete windows are gathered for one C call.
	scratch []float32
}

// NewVAD loads a Silero VAD model in whisper.cpp's ggml format. ggml's backends must be
// loaded first (engines/ggml.LoadBackends).
func NewVAD(modelPath string, p VADParams) (*VAD, error) {
	if err := regularfile.Check(modelPath); err != nil {
		return nil, fmt.Errorf("whisper: load VAD model: %w: %w", ErrLoad, err)
	}
	cp := C.whisper_vad_default_context_params()
	cp.n_threads = C.int(max(p.Threads, 1))
	cp.use_gpu = C.bool(p.UseGPU)
	cpath := C.CString(modelPath)
	defer C.free(unsafe.Pointer(cpath))
	ctx := C.whisper_vad_init_from_file_with_params(cpath, cp)
	if ctx == nil {
		return nil, fmt.Errorf("whisper: load VAD model %s: %w", modelPath, ErrLoad)
	}
	v := &VAD{ctx: ctx}
	// A fresh context's LSTM state is zero already; resetting makes that explicit
	// rather than relying on the allocator.
	C.whisper_vad_reset_state(ctx)
	return v, nil
}

// ErrLoad is wrapped by errors about model files libwhisper could not load (missing,
// unreadable, wrong format); libwhisper logs the details.
var ErrLoad = errors.New("libwhisper could not load the model")

// ErrClosed is returned by methods called after Close.
var ErrClosed = errors.New("whisper: use after Close")

// Probs feeds 16 kHz mono samples and returns the speech probability of every 512-sample
// window completed by them, in order. Samples that do not fill a window yet are kept for
// the next call, so any chunk size works and the result does not depend on it.
func (v *VAD) Probs(chunk []float32) ([]float32, error) {
	if v.ctx == nil {
		return nil, ErrClosed
	}
	total := len(v.rest) + len(chunk)
	n := total / VADWindow
	if n == 0 {
		v.rest = append(v.rest, chunk...)
		return nil, nil
	}
	// Gather the complete windows contiguously: one C call for all of them keeps the
	// per-call graph setup off the per-window path.
	need := n * VADWindow
	v.scratch = append(v.scratch[:0], v.rest...)
	v.scratch = append(v.scratch, chunk[:need-len(v.rest)]...)
	rest := chunk[need-len(v.rest):]
	v.rest = append(v.rest[:0], rest...)
	return v.detect(v.scratch)
}

// Flush scores the samples still waiting for a complete window, padded with zeros as
// libwhisper pads the end of a file, and returns their probability (none when no sample
// was waiting). Call it at the end of a stream.
func (v *VAD) Flush() ([]float32, error) {
	if v.ctx == nil {
		return nil, ErrClosed
	}
	if len(v.rest) == 0 {
		return nil, nil
	}
	v.scratch = append(v.scratch[:0], v.rest...)
	for len(v.scratch) < VADWindow {
		v.scratch = append(v.scratch, 0)
	}
	v.rest = v.rest[:0]
	return v.detect(v.scratch)
}

// WindowSize returns the number of samples each probability covers (VADWindow).
func (v *VAD) WindowSize() int { return VADWindow }

// Pending returns how many samples wait for a complete window.
func (v *VAD) Pending() int { return len(v.rest) }

func (v *VAD) detect(samples []float32) ([]float32, error) {
	ok := C.whisper_vad_detect_speech_no_reset(v.ctx, (*C.float)(unsafe.Pointer(&samples[0])), C.int(len(samples)))
	runtime.KeepAlive(samples)
	if !ok {
		return nil, errors.New("whisper: VAD inference failed")
	}
	return v.copyProbs(), nil
}

func (v *VAD) copyProbs() []float32 {
	n := int(C.whisper_vad_n_probs(v.ctx))
	if n == 0 {
		return nil
	}
	src := unsafe.Slice((*float32)(unsafe.Pointer(C.whisper_vad_probs(v.ctx))), n)
	return append([]float32(nil), src...)
}

// Reset forgets the LSTM state and any incomplete window, as at the start of a new stream.
func (v *VAD) Reset() {
	if v.ctx == nil {
		return
	}
	C.whisper_vad_reset_state(v.ctx)
	v.rest = v.rest[:0]
}

// Close frees the model. The VAD must not be used afterwards.
func (v *VAD) Close() error {
	if v.ctx != nil {
		C.whisper_vad_free(v.ctx)
		v.ctx = nil
	}
	return nil
}

// SegmentParams are libwhisper's rules for turning speech probabilities into segments
// (whisper_vad_params).
type SegmentParams struct {
	Threshold        float32
	MinSpeechMS      int
	MinSilenceMS     int
	MaxSpeechSeconds float32 // 0 means no limit
	SpeechPadMS      int
}

// DefaultSegmentParams returns libwhisper's defaults (whisper_vad_default_params).
func DefaultSegmentParams() SegmentParams {
	d := C.whisper_vad_default_params()
	p := SegmentParams{
		Threshold:    float32(d.threshold),
		MinSpeechMS:  int(d.min_speech_duration_ms),
		MinSilenceMS: int(d.min_silence_duration_ms),
		SpeechPadMS:  int(d.speech_pad_ms),
	}
	if s := float32(d.max_speech_duration_s); s < 1e5 {
		p.MaxSpeechSeconds = s
	}
	return p
}

// Span is a stretch of speech in seconds from the start of the audio.
type Span struct {
	Start, End float64
}

// SpeechSegments runs libwhisper's own whole-buffer segmentation on samples
// (whisper_vad_segments_from_samples). It resets the streaming state first and leaves it
// reset; it exists so that the streaming segmentation can be checked against libwhisper's.
func (v *VAD) SpeechSegments(samples []float32, p SegmentParams) ([]Span, error) {
	if v.ctx == nil {
		return nil, ErrClosed
	}
	if len(samples) == 0 {
		return nil, nil
	}
	v.Reset()
	defer v.Reset()
	wp := C.whisper_vad_default_params()
	wp.threshold = C.float(p.Threshold)
	wp.min_speech_duration_ms = C.int(p.MinSpeechMS)
	wp.min_silence_duration_ms = C.int(p.MinSilenceMS)
	wp.speech_pad_ms = C.int(p.SpeechPadMS)
	if p.MaxSpeechSeconds > 0 {
		wp.max_speech_duration_s = C.float(p.MaxSpeechSeconds)
	}
	segs := C.whisper_vad_segments_from_samples(v.ctx, wp, (*C.float)(unsafe.Pointer(&samples[0])), C.int(len(samples)))
	runtime.KeepAlive(samples)
	if segs == nil {
		return nil, errors.New("whisper: VAD segmentation failed")
	}
	defer C.whisper_vad_free_segments(segs)
	n := int(C.whisper_vad_segments_n_segments(segs))
	out := make([]Span, n)
	for i := range out {
		// libwhisper reports centiseconds.
		out[i] = Span{
			Start: float64(C.whisper_vad_segments_get_segment_t0(segs, C.int(i))) / 100,
			End:   float64(C.whisper_vad_segments_get_segment_t1(segs, C.int(i))) / 100,
		}
	}
	return out, nil
}

// WholeProbs returns the probabilities libwhisper computes for samples in one call
// (whisper_vad_detect_speech, which resets the state first). Like SpeechSegments it is
// a reference for checking the streaming path, and leaves the streaming state reset.
func (v *VAD) WholeProbs(samples []float32) ([]float32, error) {
	if v.ctx == nil {
		return nil, ErrClosed
	}
	if len(samples) == 0 {
		return nil, nil
	}
	v.Reset()
	defer v.Reset()
	ok := C.whisper_vad_detect_speech(v.ctx, (*C.float)(unsafe.Pointer(&samples[0])), C.int(len(samples)))
	runtime.KeepAlive(samples)
	if !ok {
		return nil, errors.New("whisper: VAD inference failed")
	}
	return v.copyProbs(), nil
}
