// Package webrtcapm is Parley's thin cgo layer over WebRTC's audio processing module
// (Debian's webrtc-audio-processing 1.3, pkg-config webrtc-audio-processing-1): the AEC3
// echo canceller, noise suppression, high-pass filter and gain control, on mono 10 ms
// frames of float32 samples in [-1, 1].
//
// A Processor is fed two streams: ProcessRender with what the loudspeaker plays (the
// far end) and ProcessCapture with what the microphone picks up (the near end), which it
// cleans in place. The two may be called from different goroutines (the library locks
// each side itself). Close may be called at any time (it waits for a running call) and
// is idempotent; afterwards every call fails with ErrClosed.
package webrtcapm

/*
#cgo pkg-config: webrtc-audio-processing-1
#cgo CXXFLAGS: -std=c++17
#include <stdlib.h>
#include "apm.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned (wrapped) by every method of a closed Processor.
var ErrClosed = errors.New("webrtcapm: use of closed processor")

// ErrFrameSize is returned (wrapped) for frames that are not 10 ms long.
var ErrFrameSize = errors.New("webrtcapm: frame is not 10 ms")

// MaxStreamDelay is the largest delay hint the library accepts; SetStreamDelay clamps to it.
const MaxStreamDelay = 500 * time.Millisecond

// Echo selects the echo controller.
type Echo int

const (
	// EchoAEC3 is WebRTC's full echo canceller (AEC3) with its own delay estimator.
	EchoAEC3 Echo = iota
	// EchoMobile is the light mobile echo controller (AECM), which trusts the delay hint.
	EchoMobile
	// EchoOff disables echo control (the other stages still run).
	EchoOff
)

// NoiseSuppression selects the noise suppressor's aggressiveness.
type NoiseSuppression int

const (
	NoiseSuppressionOff NoiseSuppression = iota
	NoiseSuppressionLow
	NoiseSuppressionModerate
	NoiseSuppressionHigh
	NoiseSuppressionVeryHigh
)

// GainControl selects gain controller 1's mode. Its analog mode is not offered: Parley
// does not steer the microphone's hardware gain.
type GainControl int

const (
	GainControlOff GainControl = iota
	// GainControlAdaptiveDigital adapts a digital gain towards TargetLevelDBFS.
	GainControlAdaptiveDigital
	// GainControlFixedDigital applies CompressionGainDB and the limiter.
	GainControlFixedDigital
)

// Config chooses the processing. The zero value is AEC3 alone at 16 kHz.
type Config struct {
	// SampleRate of both streams: 8000, 16000 (the default), 32000 or 48000.
	SampleRate int
	Echo       Echo
	// NoiseSuppression is off by default.
	NoiseSuppression NoiseSuppression
	// HighPassFilter on the capture side. AEC3 enforces one of its own either way.
	HighPassFilter bool
	// GainControl is gain controller 1; TargetLevelDBFS (0..31, as -dBFS; 0 means 3)
	// and CompressionGainDB (0..90; 0 means 9) tune it, Limiter caps its output.
	GainControl       GainControl
	TargetLevelDBFS   int
	CompressionGainDB int
	Limiter           bool
	// GainController2 turns on the newer gain controller: a fixed gain of FixedGainDB
	// (0..90) and, with AdaptiveGain, an adaptive digital gain.
	GainController2 bool
	FixedGainDB     float64
	AdaptiveGain    bool
	// DisableResidualEchoDetector turns off the detector behind
	// Stats.ResidualEchoLikelihood (it is on by default and cheap).
	DisableResidualEchoDetector bool
	// EchoFilterLength is how much of the echo path AEC3's linear filter models, rounded
	// up to its 4 ms blocks (at most MaxEchoFilterLength); 0 keeps the library's 52 ms.
	// What a room's reverberation leaves beyond it, only the suppressor can remove.
	EchoFilterLength time.Duration
	// EchoInitialState is how long (in time the far end is active) AEC3 suppresses
	// conservatively before it relies on its linear filter; 0 keeps the library's 2.5 s.
	EchoInitialState time.Duration
	// LinearOutput keeps AEC3's linear filter output for ProcessCaptureLinear: the
	// microphone with the echo the filter models subtracted, before the suppressor. It
	// keeps more echo but all of a voice that starts over it (16 kHz only).
	LinearOutput bool
	// Suppressor tunes AEC3's residual echo suppressor; its zero fields keep the
	// library's values.
	Suppressor Suppressor
}

// Suppressor is AEC3's residual echo suppressor's tuning (EchoCanceller3Config's
// suppressor and ep_strength). In each band the suppressor weighs the echo it expects
// against the near end's power: at an echo-to-near-end ratio below Transparent it
// leaves the band whole, above Suppress it removes it, in between it attenuates.
type Suppressor struct {
	// MaxGainRise is the factor by which a band's gain may rise per 4 ms block (the
	// library's 2): how fast the suppressor opens for a voice after suppressing echo.
	MaxGainRise float64
	// LowTransparent and LowSuppress are the ratios of the low bands (0.3 and 0.4),
	// HighTransparent and HighSuppress those of the high bands (0.07 and 0.1).
	LowTransparent, LowSuppress   float64
	HighTransparent, HighSuppress float64
	// ReverbDecay is the power decay per block AEC3 assumes for the echo tail its
	// filter does not model (the library's 0.83), in (0, 1).
	ReverbDecay float64
}

// LibrarySuppressor is the library's own tuning, given explicitly: a Suppressor with
// these values makes the same canceller as the zero one.
func LibrarySuppressor() Suppressor {
	return Suppressor{MaxGainRise: 2, LowTransparent: 0.3, LowSuppress: 0.4, HighTransparent: 0.07, HighSuppress: 0.1, ReverbDecay: 0.83}
}

// zero reports whether s keeps every library value.
func (s Suppressor) zero() bool { return s == Suppressor{} }

// validate reports a setting of s the suppressor cannot use.
func (s Suppressor) validate() error {
	for _, v := range []float64{s.MaxGainRise, s.LowTransparent, s.LowSuppress, s.HighTransparent, s.HighSuppress, s.ReverbDecay} {
		if !(v >= 0 && v <= 100) {
			return fmt.Errorf("webrtcapm: suppressor setting %g: want 0..100 (0: the library's)", v)
		}
	}
	if s.MaxGainRise != 0 && s.MaxGainRise < 1 {
		return fmt.Errorf("webrtcapm: suppressor gain rise %g: want at least 1", s.MaxGainRise)
	}
	if s.ReverbDecay >= 1 {
		return fmt.Errorf("webrtcapm: reverb decay %g per block: want less than 1", s.ReverbDecay)
	}
	for _, p := range [][2]float64{{s.LowTransparent, s.LowSuppress}, {s.HighTransparent, s.HighSuppress}} {
		if p[0] != 0 && p[1] != 0 && p[0] > p[1] {
			return fmt.Errorf("webrtcapm: suppressor ratios %g, %g: transparent must not exceed suppress", p[0], p[1])
		}
	}
	return nil
}

// MaxEchoFilterLength bounds Config.EchoFilterLength: the filter's cost grows with its
// length, and a room's echo 200 ms after the direct sound is mostly below the
// suppressor's reach anyway.
const MaxEchoFilterLength = 200 * time.Millisecond

// MaxEchoInitialState bounds Config.EchoInitialState: longer, AEC3 would suppress
// conservatively for a whole conversation.
const MaxEchoInitialState = time.Minute

// aec3Block is the time one of AEC3's filter blocks covers (64 samples of its 16 kHz band).
const aec3Block = 4 * time.Millisecond

func (c Config) withDefaults() Config {
	if c.SampleRate == 0 {
		c.SampleRate = 16000
	}
	if c.TargetLevelDBFS == 0 {
		c.TargetLevelDBFS = 3
	}
	if c.CompressionGainDB == 0 {
		c.CompressionGainDB = 9
	}
	return c
}

func (c Config) validate() error {
	switch c.SampleRate {
	case 8000, 16000, 32000, 48000:
	default:
		return fmt.Errorf("webrtcapm: sample rate %d Hz: want 8000, 16000, 32000 or 48000", c.SampleRate)
	}
	if c.Echo < EchoAEC3 || c.Echo > EchoOff {
		return fmt.Errorf("webrtcapm: unknown echo controller %d", c.Echo)
	}
	if c.NoiseSuppression < NoiseSuppressionOff || c.NoiseSuppression > NoiseSuppressionVeryHigh {
		return fmt.Errorf("webrtcapm: unknown noise suppression level %d", c.NoiseSuppression)
	}
	if c.GainControl < GainControlOff || c.GainControl > GainControlFixedDigital {
		return fmt.Errorf("webrtcapm: unknown gain control mode %d", c.GainControl)
	}
	if c.TargetLevelDBFS < 0 || c.TargetLevelDBFS > 31 {
		return fmt.Errorf("webrtcapm: target level %d dBFS: want 0..31", c.TargetLevelDBFS)
	}
	if c.CompressionGainDB < 0 || c.CompressionGainDB > 90 {
		return fmt.Errorf("webrtcapm: compression gain %d dB: want 0..90", c.CompressionGainDB)
	}
	if c.EchoFilterLength < 0 || c.EchoFilterLength > MaxEchoFilterLength {
		return fmt.Errorf("webrtcapm: echo filter length %v: want 0..%v", c.EchoFilterLength, MaxEchoFilterLength)
	}
	if c.LinearOutput && (c.Echo != EchoAEC3 || c.SampleRate != 16000) {
		return errors.New("webrtcapm: a linear output needs AEC3 at 16000 Hz")
	}
	if c.EchoInitialState < 0 || c.EchoInitialState > MaxEchoInitialState {
		return fmt.Errorf("webrtcapm: echo initial state %v: want 0..%v", c.EchoInitialState, MaxEchoInitialState)
	}
	if (c.EchoFilterLength != 0 || c.EchoInitialState != 0 || !c.Suppressor.zero()) && c.Echo != EchoAEC3 {
		return errors.New("webrtcapm: the echo filter length, initial state and suppressor are AEC3's settings")
	}
	if err := c.Suppressor.validate(); err != nil {
		return err
	}
	if !(c.FixedGainDB >= 0 && c.FixedGainDB <= 90) {
		return fmt.Errorf("webrtcapm: fixed gain %g dB: want 0..90", c.FixedGainDB)
	}
	return nil
}

// Processor is one WebRTC audio processing instance.
type Processor struct {
	// mu is held for reading by every call into the library (which locks its render
	// and capture sides itself) and for writing by Close, so that Close never frees
	// the processor under a running call.
	mu        sync.RWMutex
	p         *C.parley_apm
	rate      int
	frameSize int
	latency   time.Duration
	delayMS   atomic.Int32
	linear    bool
}

// New makes a Processor. Close it when done.
func New(cfg Config) (*Processor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cc := C.parley_apm_config{
		sample_rate:              C.int(cfg.SampleRate),
		noise_suppression:        C.int(int(cfg.NoiseSuppression) - 1),
		high_pass_filter:         cbool(cfg.HighPassFilter),
		agc1_mode:                C.PARLEY_APM_AGC1_OFF,
		agc1_target_level_dbfs:   C.int(cfg.TargetLevelDBFS),
		agc1_compression_gain_db: C.int(cfg.CompressionGainDB),
		agc1_limiter:             cbool(cfg.Limiter),
		agc2:                     cbool(cfg.GainController2),
		agc2_fixed_gain_db:       C.float(cfg.FixedGainDB),
		agc2_adaptive:            cbool(cfg.AdaptiveGain),
		residual_echo_detector:   cbool(!cfg.DisableResidualEchoDetector),
		aec3_filter_blocks:       C.int((cfg.EchoFilterLength + aec3Block - 1) / aec3Block),
		aec3_initial_state_ms:    C.int((cfg.EchoInitialState + time.Millisecond - 1) / time.Millisecond),
		aec3_linear_output:       cbool(cfg.LinearOutput),
		aec3_max_gain_rise:       C.float(cfg.Suppressor.MaxGainRise),
		aec3_lf_transparent:      C.float(cfg.Suppressor.LowTransparent),
		aec3_lf_suppress:         C.float(cfg.Suppressor.LowSuppress),
		aec3_hf_transparent:      C.float(cfg.Suppressor.HighTransparent),
		aec3_hf_suppress:         C.float(cfg.Suppressor.HighSuppress),
		aec3_reverb_decay:        C.float(cfg.Suppressor.ReverbDecay),
	}
	switch cfg.Echo {
	case EchoAEC3:
		cc.echo = C.PARLEY_APM_ECHO_AEC3
	case EchoMobile:
		cc.echo = C.PARLEY_APM_ECHO_MOBILE
	case EchoOff:
		cc.echo = C.PARLEY_APM_ECHO_OFF
	}
	switch cfg.GainControl {
	case GainControlAdaptiveDigital:
		cc.agc1_mode = C.PARLEY_APM_AGC1_ADAPTIVE_DIGITAL
	case GainControlFixedDigital:
		cc.agc1_mode = C.PARLEY_APM_AGC1_FIXED_DIGITAL
	}
	var code C.int
	p := C.parley_apm_new(&cc, &code)
	if p == nil {
		return nil, fmt.Errorf("webrtcapm: new: %w", codeError(int(code)))
	}
	return &Processor{p: p, rate: cfg.SampleRate, frameSize: cfg.SampleRate / 100, latency: latency(cfg), linear: cfg.LinearOutput}, nil
}

// latency is how far the library's output lags its input for a config, as measured
// with webrtc-audio-processing 1.3 (TestLatency checks it against the library): AEC3
// works in blocks that cost 8 ms, the mobile echo controller 7 ms, noise suppression
// 6 ms; the 32 and 48 kHz band-splitting filters add a little, and 8 kHz audio, which
// the library processes at 16 kHz, 3 ms.
func latency(cfg Config) time.Duration {
	var d time.Duration
	switch cfg.Echo {
	case EchoAEC3:
		d += 8 * time.Millisecond
	case EchoMobile:
		d += 7 * time.Millisecond
	}
	if cfg.NoiseSuppression != NoiseSuppressionOff {
		d += 6 * time.Millisecond
	}
	split := cfg.Echo != EchoOff || cfg.NoiseSuppression != NoiseSuppressionOff || cfg.GainControl != GainControlOff
	samples := int64(d) * int64(cfg.SampleRate) / int64(time.Second)
	switch {
	case cfg.SampleRate == 8000:
		samples += 24
	case cfg.SampleRate == 32000 && split:
		samples += 3
	case cfg.SampleRate == 48000 && split:
		samples += 47
	}
	// Round up, so that converting back to samples gives the same count.
	return time.Duration((samples*int64(time.Second) + int64(cfg.SampleRate) - 1) / int64(cfg.SampleRate))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// SampleRate returns the rate of both streams.
func (p *Processor) SampleRate() int { return p.rate }

// FrameSize returns the number of samples in one 10 ms frame.
func (p *Processor) FrameSize() int { return p.frameSize }

// Latency returns how far the processed capture audio lags the audio given to
// ProcessCapture: the library's algorithmic delay, which depends on the enabled
// stages (8 ms for AEC3 at 16 kHz).
func (p *Processor) Latency() time.Duration { return p.latency }

// ProcessRender hands the processor one 10 ms frame of what the loudspeaker plays. The
// frame is only read.
func (p *Processor) ProcessRender(far []float32) error {
	if len(far) != p.frameSize {
		return fmt.Errorf("webrtcapm: render: %d samples: %w (want %d)", len(far), ErrFrameSize, p.frameSize)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.p == nil {
		return fmt.Errorf("webrtcapm: render: %w", ErrClosed)
	}
	if rc := C.parley_apm_analyze_render(p.p, (*C.float)(&far[0])); rc != 0 {
		return fmt.Errorf("webrtcapm: render: %w", codeError(int(rc)))
	}
	return nil
}

// ProcessCapture cleans one 10 ms frame of microphone audio in place.
func (p *Processor) ProcessCapture(near []float32) error {
	return p.capture(near, nil)
}

// ProcessCaptureLinear is ProcessCapture that also fills linear, as long as near, with
// the frame's linear filter output (Config.LinearOutput), aligned as near's output is.
func (p *Processor) ProcessCaptureLinear(near, linear []float32) error {
	if !p.linear {
		return errors.New("webrtcapm: capture: the processor keeps no linear output")
	}
	if len(linear) != len(near) {
		return fmt.Errorf("webrtcapm: capture: a linear output of %d samples for %d: %w", len(linear), len(near), ErrFrameSize)
	}
	return p.capture(near, linear)
}

// capture processes near in place and, when linear is not nil, copies the frame's
// linear output into it, both under one hold of mu.
func (p *Processor) capture(near, linear []float32) error {
	if len(near) != p.frameSize {
		return fmt.Errorf("webrtcapm: capture: %d samples: %w (want %d)", len(near), ErrFrameSize, p.frameSize)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.p == nil {
		return fmt.Errorf("webrtcapm: capture: %w", ErrClosed)
	}
	if rc := C.parley_apm_process_capture(p.p, (*C.float)(&near[0]), C.int(p.delayMS.Load())); rc != 0 {
		return fmt.Errorf("webrtcapm: capture: %w", codeError(int(rc)))
	}
	if linear != nil && C.parley_apm_linear_output(p.p, (*C.float)(&linear[0])) == 0 {
		return errors.New("webrtcapm: capture: the library gave no linear output")
	}
	return nil
}

// SetStreamDelay sets the delay hint: the time from a frame's ProcessRender until its
// echo reaches ProcessCapture (output latency + acoustic path + input latency, minus how
// much earlier the render call happens than the capture call). AEC3 estimates the delay
// itself and uses the hint only as a starting point; the mobile controller relies on it.
// The hint is clamped to [0, MaxStreamDelay]. It may be called at any time, from any
// goroutine, and after Close (when it does nothing).
func (p *Processor) SetStreamDelay(d time.Duration) {
	d = min(max(d, 0), MaxStreamDelay)
	p.delayMS.Store(int32(d / time.Millisecond))
}

// Stats are the processor's own estimates; a field is valid only when its OK is true
// (AEC3 reports the echo figures once it has seen echo; the residual echo detector once
// it has seen both streams).
type Stats struct {
	// EchoReturnLoss (ERL) in dB: far-end power over echo power at the microphone.
	EchoReturnLoss Value
	// EchoReturnLossEnhancement (ERLE) in dB: echo power over residual echo power.
	EchoReturnLossEnhancement Value
	// DivergentFilterFraction: share of the last second the linear filter diverged.
	DivergentFilterFraction Value
	// Delay is AEC3's current estimate of the render-to-capture delay.
	Delay, DelayMedian, DelayStdDev Duration
	// ResidualEchoLikelihood in [0, 1]: how likely the output still holds echo, and its
	// recent maximum.
	ResidualEchoLikelihood, ResidualEchoLikelihoodRecentMax Value
}

// Value is an optional figure.
type Value struct {
	V  float64
	OK bool
}

// Duration is an optional duration.
type Duration struct {
	D  time.Duration
	OK bool
}

// Stats returns the current statistics; after Close it returns the zero Stats.
func (p *Processor) Stats() Stats {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.p == nil {
		return Stats{}
	}
	var s C.parley_apm_stats
	C.parley_apm_stats_get(p.p, &s)
	ms := func(v C.int, ok C.int) Duration {
		return Duration{D: time.Duration(v) * time.Millisecond, OK: ok != 0}
	}
	return Stats{
		EchoReturnLoss:                  Value{float64(s.erl), s.has_erl != 0},
		EchoReturnLossEnhancement:       Value{float64(s.erle), s.has_erle != 0},
		DivergentFilterFraction:         Value{float64(s.divergent), s.has_divergent != 0},
		Delay:                           ms(s.delay_ms, s.has_delay),
		DelayMedian:                     ms(s.delay_median_ms, s.has_delay_median),
		DelayStdDev:                     ms(s.delay_std_ms, s.has_delay_std),
		ResidualEchoLikelihood:          Value{float64(s.residual), s.has_residual != 0},
		ResidualEchoLikelihoodRecentMax: Value{float64(s.residual_max), s.has_residual_max != 0},
	}
}

// Close frees the processor. It is idempotent; later calls of the other methods fail
// with ErrClosed.
func (p *Processor) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.p != nil {
		C.parley_apm_free(p.p)
		p.p = nil
	}
	return nil
}

// codeError names an AudioProcessing error code.
func codeError(code int) error {
	var name string
	switch code {
	case -1:
		name = "unspecified error"
	case -2:
		name = "creation failed"
	case -3:
		name = "unsupported component"
	case -4:
		name = "unsupported function"
	case -5:
		name = "null pointer"
	case -6:
		name = "bad parameter"
	case -7:
		name = "bad sample rate"
	case -8:
		name = "bad data length"
	case -9:
		name = "bad number of channels"
	case -10:
		name = "file error"
	case -11:
		name = "stream parameter not set"
	case -12:
		name = "not enabled"
	case -13:
		name = "bad stream parameter"
	default:
		name = "unknown error"
	}
	return fmt.Errorf("audio processing error %d (%s)", code, name)
}
