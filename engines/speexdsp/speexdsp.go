// Package speexdsp is Parley's thin cgo layer over libspeexdsp's acoustic echo canceller
// (the MDF adaptive filter, speex_echo_*) and its preprocessor, which suppresses the
// residual echo the filter leaves (speex_preprocess_* with the echo state attached).
//
// The shape matches engines/webrtcapm: ProcessRender takes 10 ms of what the speaker
// plays, ProcessCapture cleans 10 ms of microphone audio in place. Unlike WebRTC's AEC3,
// speex has no delay estimator: its filter covers echoes from 0 to FilterLength after
// the reference it is given. The Canceller therefore pairs each capture frame with a
// render frame itself: render frames wait in a queue, each capture frame takes the
// oldest, and SetStreamDelay keeps the queue that much longer (minus DelayMargin), so
// the filter only has to cover the uncertain part of the delay and the room.
package speexdsp

/*
#cgo pkg-config: speexdsp
#include <stdlib.h>
#include <speex/speex_echo.h>
#include <speex/speex_preprocess.h>

static int parley_echo_set_rate(SpeexEchoState *st, int rate) {
	return speex_echo_ctl(st, SPEEX_ECHO_SET_SAMPLING_RATE, &rate);
}

static int parley_echo_response_size(SpeexEchoState *st) {
	int n = 0;
	speex_echo_ctl(st, SPEEX_ECHO_GET_IMPULSE_RESPONSE_SIZE, &n);
	return n;
}

static void parley_echo_response(SpeexEchoState *st, spx_int32_t *out) {
	speex_echo_ctl(st, SPEEX_ECHO_GET_IMPULSE_RESPONSE, out);
}

static int parley_pre_set_int(SpeexPreprocessState *st, int request, int value) {
	return speex_preprocess_ctl(st, request, &value);
}

static int parley_pre_attach_echo(SpeexPreprocessState *st, SpeexEchoState *echo) {
	return speex_preprocess_ctl(st, SPEEX_PREPROCESS_SET_ECHO_STATE, echo);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// ErrClosed is returned (wrapped) by every method of a closed Canceller.
var ErrClosed = errors.New("speexdsp: use of closed canceller")

// ErrFrameSize is returned (wrapped) for frames that are not 10 ms long.
var ErrFrameSize = errors.New("speexdsp: frame is not 10 ms")

// Defaults for zero Config fields.
const (
	DefaultSampleRate   = 16000
	DefaultFilterLength = 200 * time.Millisecond
	// DefaultEchoSuppressDB and DefaultEchoSuppressActiveDB are the preprocessor's
	// maximum residual echo attenuation without and with near-end speech (libspeexdsp's
	// own defaults).
	DefaultEchoSuppressDB       = -40
	DefaultEchoSuppressActiveDB = -15
	DefaultNoiseSuppressDB      = -15
	// DelayMargin is how much of the delay hint is left to the filter, so that a hint
	// a little too long does not put the echo before its reference.
	DelayMargin = 20 * time.Millisecond
	// MaxQueue bounds the render queue: when render runs this far ahead of capture,
	// the oldest frames are dropped.
	MaxQueue = time.Second
)

// Config chooses the canceller. The zero value is a 200 ms filter at 16 kHz with
// residual echo and noise suppression.
type Config struct {
	// SampleRate of both streams, 8000..48000 Hz (default 16000).
	SampleRate int
	// FilterLength is the echo tail the adaptive filter models (default 200 ms, at most
	// 1 s). Longer tails cancel more of a reverberant room but converge more slowly and
	// cost more.
	FilterLength time.Duration
	// LinearOnly skips the preprocessor: the output is the adaptive filter's alone.
	LinearOnly bool
	// EchoSuppressDB and EchoSuppressActiveDB (negative dB) set the preprocessor's
	// residual echo suppression; zero means the defaults above.
	EchoSuppressDB, EchoSuppressActiveDB int
	// NoiseSuppressDB (negative dB) is the preprocessor's maximum noise attenuation;
	// zero means DefaultNoiseSuppressDB. Speex applies its residual echo suppression
	// through the noise suppressor's gains, so the two cannot be separated.
	NoiseSuppressDB int
}

func (c Config) withDefaults() Config {
	if c.SampleRate == 0 {
		c.SampleRate = DefaultSampleRate
	}
	if c.FilterLength == 0 {
		c.FilterLength = DefaultFilterLength
	}
	if c.EchoSuppressDB == 0 {
		c.EchoSuppressDB = DefaultEchoSuppressDB
	}
	if c.EchoSuppressActiveDB == 0 {
		c.EchoSuppressActiveDB = DefaultEchoSuppressActiveDB
	}
	if c.NoiseSuppressDB == 0 {
		c.NoiseSuppressDB = DefaultNoiseSuppressDB
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.SampleRate < 8000 || c.SampleRate > 48000 || c.SampleRate%100 != 0:
		return fmt.Errorf("speexdsp: sample rate %d Hz: want 8000..48000, a multiple of 100", c.SampleRate)
	case c.FilterLength < 10*time.Millisecond || c.FilterLength > time.Second:
		return fmt.Errorf("speexdsp: filter length %v: want 10ms..1s", c.FilterLength)
	case c.EchoSuppressDB > 0 || c.EchoSuppressDB < -100:
		return fmt.Errorf("speexdsp: echo suppression %d dB: want -100..0", c.EchoSuppressDB)
	case c.EchoSuppressActiveDB > 0 || c.EchoSuppressActiveDB < -100:
		return fmt.Errorf("speexdsp: active echo suppression %d dB: want -100..0", c.EchoSuppressActiveDB)
	case c.NoiseSuppressDB > 0 || c.NoiseSuppressDB < -100:
		return fmt.Errorf("speexdsp: noise suppression %d dB: want -100..0", c.NoiseSuppressDB)
	}
	return nil
}

// Canceller is one speex echo canceller (and preprocessor). ProcessRender,
// ProcessCapture, SetStreamDelay and Stats may be called from different goroutines;
// a mutex serialises them.
type Canceller struct {
	mu         sync.Mutex
	echo       *C.SpeexEchoState
	pre        *C.SpeexPreprocessState // nil with LinearOnly
	rate       int
	frameSize  int
	linearOnly bool

	// Render frames waiting for their capture frame, oldest first, as int16 for speex.
	queue    [][]C.spx_int16_t
	spare    [][]C.spx_int16_t // recycled frames
	delay    int               // frames of delay hint the queue holds back
	silence  []C.spx_int16_t
	rec, out []C.spx_int16_t
	underrun int64 // capture frames that found no render frame
	dropped  int64 // render frames dropped because the queue was full
}

// New makes a Canceller. Close it when done.
func New(cfg Config) (*Canceller, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := cfg.SampleRate / 100
	taps := int(int64(cfg.FilterLength) * int64(cfg.SampleRate) / int64(time.Second))
	echo := C.speex_echo_state_init(C.int(n), C.int(taps))
	if echo == nil {
		return nil, errors.New("speexdsp: speex_echo_state_init failed")
	}
	C.parley_echo_set_rate(echo, C.int(cfg.SampleRate))
	c := &Canceller{
		echo:       echo,
		rate:       cfg.SampleRate,
		frameSize:  n,
		linearOnly: cfg.LinearOnly,
		silence:    make([]C.spx_int16_t, n),
		rec:        make([]C.spx_int16_t, n),
		out:        make([]C.spx_int16_t, n),
	}
	if !cfg.LinearOnly {
		pre := C.speex_preprocess_state_init(C.int(n), C.int(cfg.SampleRate))
		if pre == nil {
			C.speex_echo_state_destroy(echo)
			return nil, errors.New("speexdsp: speex_preprocess_state_init failed")
		}
		c.pre = pre
		C.parley_pre_attach_echo(pre, echo)
		// The residual echo suppression is applied through the denoiser's gains: without
		// it libspeexdsp applies no gain at all.
		C.parley_pre_set_int(pre, C.SPEEX_PREPROCESS_SET_DENOISE, 1)
		C.parley_pre_set_int(pre, C.SPEEX_PREPROCESS_SET_NOISE_SUPPRESS, C.int(cfg.NoiseSuppressDB))
		C.parley_pre_set_int(pre, C.SPEEX_PREPROCESS_SET_ECHO_SUPPRESS, C.int(cfg.EchoSuppressDB))
		C.parley_pre_set_int(pre, C.SPEEX_PREPROCESS_SET_ECHO_SUPPRESS_ACTIVE, C.int(cfg.EchoSuppressActiveDB))
	}
	return c, nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// SampleRate returns the rate of both streams.
func (c *Canceller) SampleRate() int { return c.rate }

// FrameSize returns the number of samples in one 10 ms frame.
func (c *Canceller) FrameSize() int { return c.frameSize }

// Latency returns how far the cleaned capture audio lags the audio given to
// ProcessCapture: the adaptive filter works in step, the preprocessor's overlap-add
// costs one frame (TestLatency checks it).
func (c *Canceller) Latency() time.Duration {
	if c.linearOnly {
		return 0
	}
	return 10 * time.Millisecond
}

// ProcessRender queues one 10 ms frame of what the speaker plays; the next capture
// frame without a partner takes it. The frame is only read.
func (c *Canceller) ProcessRender(far []float32) error {
	if len(far) != c.frameSize {
		return fmt.Errorf("speexdsp: render: %d samples: %w (want %d)", len(far), ErrFrameSize, c.frameSize)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.echo == nil {
		return fmt.Errorf("speexdsp: render: %w", ErrClosed)
	}
	if len(c.queue) >= c.maxQueue() {
		c.recycle(c.queue[0])
		c.queue = c.queue[1:]
		c.dropped++
	}
	f := c.frame()
	toInt16(f, far)
	c.queue = append(c.queue, f)
	return nil
}

// ProcessCapture cancels the echo in one 10 ms frame of microphone audio, in place.
func (c *Canceller) ProcessCapture(near []float32) error {
	if len(near) != c.frameSize {
		return fmt.Errorf("speexdsp: capture: %d samples: %w (want %d)", len(near), ErrFrameSize, c.frameSize)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.echo == nil {
		return fmt.Errorf("speexdsp: capture: %w", ErrClosed)
	}
	// Hold the hinted delay back: the reference is the frame rendered delay frames
	// before the newest one.
	play := c.silence
	var used []C.spx_int16_t
	if len(c.queue) > c.delay {
		used = c.queue[0]
		play = used
		c.queue = c.queue[1:]
	} else {
		c.underrun++
	}
	toInt16(c.rec, near)
	C.speex_echo_cancellation(c.echo, &c.rec[0], &play[0], &c.out[0])
	if c.pre != nil {
		C.speex_preprocess_run(c.pre, &c.out[0])
	}
	for i, v := range c.out {
		near[i] = float32(v) / 32768
	}
	if used != nil {
		c.recycle(used)
	}
	return nil
}

// SetStreamDelay sets the delay hint: the time from a frame's ProcessRender to its echo
// reaching ProcessCapture. The canceller delays the reference by the hint minus
// DelayMargin (in whole frames), so the filter covers the margin and the room. A change
// makes the filter readapt. The hint is clamped to [0, MaxQueue/2].
func (c *Canceller) SetStreamDelay(d time.Duration) {
	d = min(max(d-DelayMargin, 0), MaxQueue/2)
	frames := int(d / (10 * time.Millisecond))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.echo == nil {
		return
	}
	// Pad the queue with silence (or drop from it) so that the frame a capture takes
	// next moves by the change.
	for ; c.delay < frames; c.delay++ {
		f := c.frame()
		clear(f)
		c.queue = append([][]C.spx_int16_t{f}, c.queue...)
	}
	for ; c.delay > frames; c.delay-- {
		if len(c.queue) > 0 {
			c.recycle(c.queue[0])
			c.queue = c.queue[1:]
		}
	}
}

func (c *Canceller) maxQueue() int {
	return int(MaxQueue/(10*time.Millisecond)) + c.delay
}

func (c *Canceller) frame() []C.spx_int16_t {
	if n := len(c.spare); n > 0 {
		f := c.spare[n-1]
		c.spare = c.spare[:n-1]
		return f
	}
	return make([]C.spx_int16_t, c.frameSize)
}

func (c *Canceller) recycle(f []C.spx_int16_t) { c.spare = append(c.spare, f) }

func toInt16(dst []C.spx_int16_t, src []float32) {
	for i, v := range src {
		s := math.Round(float64(v) * 32768)
		dst[i] = C.spx_int16_t(min(max(s, -32768), 32767))
	}
}

// Stats describe the adaptive filter. Speex has no ERLE estimate of its own.
type Stats struct {
	// Delay is where the filter's impulse response peaks, counted from the reference
	// the filter was given (so the delay hint's part is added back in): the echo
	// path's delay once the filter has converged.
	Delay time.Duration
	// EchoReturnLoss is the filter's estimate of the echo path's loss in dB (the far
	// end's power over the echo's, from the energy of its impulse response); OK is
	// false while the filter is still empty.
	EchoReturnLoss   float64
	EchoReturnLossOK bool
	// Underruns counts capture frames that found no render frame (paired with
	// silence); Dropped counts render frames dropped because render ran more than
	// MaxQueue ahead of capture. Either means the two streams are not in step.
	Underruns, Dropped int64
}

// Stats returns the current statistics; after Close it returns the zero Stats.
func (c *Canceller) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.echo == nil {
		return Stats{}
	}
	s := Stats{Underruns: c.underrun, Dropped: c.dropped}
	n := int(C.parley_echo_response_size(c.echo))
	if n <= 0 {
		return s
	}
	h := make([]C.spx_int32_t, n)
	C.parley_echo_response(c.echo, &h[0])
	// libspeexdsp scales the response by 32767 and by its FFT size (two frames),
	// which its inverse transform does not normalise.
	scale := 32767 * 2 * float64(c.frameSize)
	var energy, peak float64
	at := 0
	for i, v := range h {
		x := float64(v) / scale
		energy += x * x
		if math.Abs(x) > peak {
			peak, at = math.Abs(x), i
		}
	}
	s.Delay = time.Duration(int64(at+c.delay*c.frameSize) * int64(time.Second) / int64(c.rate))
	if energy > 0 {
		s.EchoReturnLoss, s.EchoReturnLossOK = -10*math.Log10(energy), true
	}
	return s
}

// Close frees the canceller. It is idempotent; later calls of the other methods fail
// with ErrClosed.
func (c *Canceller) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pre != nil {
		C.speex_preprocess_state_destroy(c.pre)
		c.pre = nil
	}
	if c.echo != nil {
		C.speex_echo_state_destroy(c.echo)
		c.echo = nil
	}
	c.queue, c.spare = nil, nil
	return nil
}
