package portaudio

/*
#include "device.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime/cgo"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Timing is PortAudio's timing for one callback, on the stream's clock (see
// Stream.Time; with ALSA it is the system's wall clock in seconds).
type Timing struct {
	// InputADC is when the first input frame of the buffer was captured.
	InputADC time.Duration
	// Current is when the callback was called.
	Current time.Duration
	// OutputDAC is when the first output frame of the buffer will reach the listener.
	OutputDAC time.Duration
}

// Flags report trouble the host noticed before a callback.
type Flags uint32

// Callback flags (PortAudio's paInputUnderflow ... paPrimingOutput).
const (
	InputUnderflow  Flags = C.paInputUnderflow
	InputOverflow   Flags = C.paInputOverflow
	OutputUnderflow Flags = C.paOutputUnderflow
	OutputOverflow  Flags = C.paOutputOverflow
	PrimingOutput   Flags = C.paPrimingOutput
)

// InputFunc receives captured audio: frames sample frames, interleaved float32, valid
// only during the call. It runs on PortAudio's real-time thread: it must return quickly,
// never block (no locks another goroutine may hold long, no blocking channel sends, no
// I/O) and should not allocate.
type InputFunc func(in []float32, frames int, t Timing, flags Flags)

// OutputFunc fills out (frames sample frames, interleaved float32) with the audio to play
// next; every sample must be written. The rules of InputFunc apply.
type OutputFunc func(out []float32, frames int, t Timing, flags Flags)

// StreamConfig describes a stream to open.
type StreamConfig struct {
	Device Info
	// Channels is the channel count; 0 picks mono if the device takes it, else stereo,
	// else the device's maximum.
	Channels int
	// SampleRate in Hz; 0 means the device's default rate.
	SampleRate float64
	// Latency is the suggested latency; 0 means the device's default low latency for
	// the direction.
	Latency time.Duration
	// FramesPerBuffer fixes the callback size; 0 lets the host choose, which is what
	// gives the lowest latency on most hosts.
	FramesPerBuffer int
	// NormalPriority keeps the callback thread at normal priority. By default an ALSA
	// stream's callback thread asks for real-time (SCHED_FIFO) scheduling, so that a busy
	// machine does not starve the audio; where the process may not raise priorities the
	// request is ignored. Other host APIs manage their threads themselves.
	NormalPriority bool
	// OnFinished, when set, is called once when the stream has finished: after Stop,
	// Abort or Close, or because the device failed. It is called on PortAudio's thread
	// (or the one calling Stop): it must not block and must not call the Stream's methods.
	OnFinished func()
}

// ErrStreamFailed is wrapped by Stream.Err when the stream ended on its own: the device
// disappeared, its sound server died, or the host reported an error.
var ErrStreamFailed = errors.New("audio stream stopped unexpectedly")

// Stream is an open PortAudio callback stream in one direction.
//
// Ownership: the callback function runs on PortAudio's thread and is the only code that
// touches the buffers it is given. The Stream's own fields are either immutable after
// Open, atomics (shared with that thread), or guarded by mu (lifecycle calls, which may
// come from the owner and from Host.Close).
type Stream struct {
	host     *Host
	dir      Direction
	device   Info
	channels int
	rate     float64
	input    InputFunc
	output   OutputFunc
	handle   cgo.Handle
	onFinish func()

	mu      sync.Mutex
	pa      unsafe.Pointer // the PaStream; nil once closed
	started bool

	stopping   atomic.Bool // Stop, Abort or Close asked for the end
	stuck      atomic.Bool // an end did not return (see bounded)
	finished   chan struct{}
	finishOnce sync.Once
	failure    atomic.Pointer[error] // why the stream ended on its own, if it did
	callbacks  atomic.Uint64
}

// OpenInput opens a capture stream that calls fn with every captured buffer. The stream
// is not started.
func (h *Host) OpenInput(cfg StreamConfig, fn InputFunc) (*Stream, error) {
	if fn == nil {
		return nil, errors.New("device: OpenInput without a callback")
	}
	return h.open(cfg, Input, fn, nil)
}

// OpenOutput opens a playback stream that calls fn for every buffer to play. The stream
// is not started.
func (h *Host) OpenOutput(cfg StreamConfig, fn OutputFunc) (*Stream, error) {
	if fn == nil {
		return nil, errors.New("device: OpenOutput without a callback")
	}
	return h.open(cfg, Output, nil, fn)
}

// params fills in cfg's defaults for dir and returns PortAudio's parameters.
func (cfg StreamConfig) params(dir Direction) (C.PaStreamParameters, error) {
	d := cfg.Device
	maxCh := d.MaxOutputChannels
	latency := d.DefaultLowOutputLatency
	if dir == Input {
		maxCh, latency = d.MaxInputChannels, d.DefaultLowInputLatency
	}
	if maxCh <= 0 {
		return C.PaStreamParameters{}, fmt.Errorf("device: %q has no %s channels", d.Name, dir)
	}
	if cfg.Channels < 0 || cfg.Channels > maxCh {
		return C.PaStreamParameters{}, fmt.Errorf("device: %q has at most %d %s channels, not %d", d.Name, maxCh, dir, cfg.Channels)
	}
	if cfg.Latency > 0 {
		latency = cfg.Latency
	}
	return C.PaStreamParameters{
		device:           C.PaDeviceIndex(d.Index),
		channelCount:     C.int(cfg.Channels),
		sampleFormat:     C.paFloat32,
		suggestedLatency: C.PaTime(latency.Seconds()),
	}, nil
}

// Negotiate fills in cfg's zero Channels and SampleRate with values the device accepts
// for dir: the channel count as StreamConfig documents, the device's default rate.
func (h *Host) Negotiate(cfg StreamConfig, dir Direction) (StreamConfig, error) {
	if err := h.check(); err != nil {
		return cfg, err
	}
	if cfg.SampleRate == 0 {
		cfg.SampleRate = cfg.Device.DefaultSampleRate
	}
	if cfg.SampleRate <= 0 {
		return cfg, fmt.Errorf("device: %q reports no default sample rate; set one", cfg.Device.Name)
	}
	if cfg.Channels != 0 {
		return cfg, h.Supports(cfg, dir)
	}
	maxCh := cfg.Device.MaxOutputChannels
	if dir == Input {
		maxCh = cfg.Device.MaxInputChannels
	}
	var firstErr error
	for _, ch := range []int{1, 2, maxCh} {
		if ch > maxCh || ch <= 0 {
			continue
		}
		try := cfg
		try.Channels = ch
		err := h.Supports(try, dir)
		if err == nil {
			return try, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("device: %q has no %s channels", cfg.Device.Name, dir)
	}
	return cfg, firstErr
}

// Supports reports (as nil) whether the device accepts cfg for dir.
func (h *Host) Supports(cfg StreamConfig, dir Direction) error {
	if err := h.check(); err != nil {
		return err
	}
	p, err := cfg.params(dir)
	if err != nil {
		return err
	}
	if cfg.Channels == 0 {
		return errors.New("device: Supports needs a channel count")
	}
	if err := lockPA(lockWait); err != nil {
		return fmt.Errorf("device: %w", err)
	}
	defer unlockPA()
	var res C.PaError
	if dir == Input {
		res = C.Pa_IsFormatSupported(&p, nil, C.double(cfg.SampleRate))
	} else {
		res = C.Pa_IsFormatSupported(nil, &p, C.double(cfg.SampleRate))
	}
	if err := paError(res); err != nil {
		return fmt.Errorf("device: %q does not take %d %s channel(s) at %g Hz: %w", cfg.Device.Name, cfg.Channels, dir, cfg.SampleRate, err)
	}
	return nil
}

func (h *Host) open(cfg StreamConfig, dir Direction, in InputFunc, out OutputFunc) (*Stream, error) {
	cfg, err := h.Negotiate(cfg, dir)
	if err != nil {
		return nil, err
	}
	p, err := cfg.params(dir)
	if err != nil {
		return nil, err
	}
	s := &Stream{
		host: h, dir: dir, device: cfg.Device, channels: cfg.Channels, rate: cfg.SampleRate,
		input: in, output: out, onFinish: cfg.OnFinished, finished: make(chan struct{}),
	}
	s.handle = cgo.NewHandle(s)
	frames := C.ulong(C.paFramesPerBufferUnspecified)
	if cfg.FramesPerBuffer > 0 {
		frames = C.ulong(cfg.FramesPerBuffer)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.handle.Delete()
		return nil, ErrClosed
	}
	if err := lockPA(lockWait); err != nil {
		s.handle.Delete()
		return nil, fmt.Errorf("device: open %s stream on %q: %w", dir, cfg.Device.Name, err)
	}
	restoreEnv := directToServerDevice(cfg.Device, dir)
	var pa unsafe.Pointer
	var res C.PaError
	if dir == Input {
		res = C.parley_open_stream(&pa, &p, nil, C.double(cfg.SampleRate), frames, C.paNoFlag, C.uintptr_t(s.handle))
	} else {
		res = C.parley_open_stream(&pa, nil, &p, C.double(cfg.SampleRate), frames, C.paNoFlag, C.uintptr_t(s.handle))
	}
	err = paError(res)
	restoreEnv()
	if err == nil && !cfg.NormalPriority && isALSA(cfg.Device.Index) {
		C.parley_alsa_realtime(pa, 1)
	}
	unlockPA()
	if err != nil {
		s.handle.Delete()
		return nil, fmt.Errorf("device: open %s stream on %q (%d ch, %g Hz): %w", dir, cfg.Device.Name, cfg.Channels, cfg.SampleRate, err)
	}
	s.pa = pa
	h.streams[s] = struct{}{}
	return s, nil
}

// directToServerDevice points the stream about to open on d at d's sound-server source or
// sink, and returns the function that undoes it once the stream is open. ALSA's pulse
// plugin, which the "pulse" device is, creates its PulseAudio context when the stream
// opens, and libpulse takes the default source and sink from PULSE_SOURCE and PULSE_SINK
// at that moment; os.Setenv reaches C's environment in a cgo program. The environment is
// the process's, so this runs under paLock, and only around Pa_OpenStream: other streams,
// later ones included, keep the user's own settings.
func directToServerDevice(d Info, dir Direction) (restore func()) {
	if d.ServerDevice == nil {
		return func() {}
	}
	name := "PULSE_SINK"
	if dir == Input {
		name = "PULSE_SOURCE"
	}
	old, had := os.LookupEnv(name)
	_ = os.Setenv(name, d.ServerDevice.Name)
	return func() {
		if had {
			_ = os.Setenv(name, old)
		} else {
			_ = os.Unsetenv(name)
		}
	}
}

// isALSA reports whether device index belongs to the ALSA host API. Call with paLock held.
func isALSA(index int) bool {
	d := C.Pa_GetDeviceInfo(C.PaDeviceIndex(index))
	if d == nil {
		return false
	}
	api := C.Pa_GetHostApiInfo(d.hostApi)
	return api != nil && api._type == C.paALSA
}

// Device returns the device the stream plays or captures on.
func (s *Stream) Device() Info { return s.device }

// Channels returns the stream's channel count.
func (s *Stream) Channels() int { return s.channels }

// SampleRate returns the rate the stream was opened with.
func (s *Stream) SampleRate() float64 { return s.rate }

// Start starts the stream. A stream starts once; open a new one to start again.
func (s *Stream) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pa == nil {
		return ErrClosed
	}
	if s.started {
		return errors.New("device: stream already started")
	}
	s.started = true
	if err := paError(C.Pa_StartStream(s.pa)); err != nil {
		if s.endedAlready() {
			// It started and ended before PortAudio's start returned: when the callback
			// ends the stream at once, ALSA's callback thread can exit before PortAudio
			// raises its priority, which then fails (ESRCH) and is reported as "Internal
			// PortAudio error". Finished and Err tell how the stream ended.
			return nil
		}
		return fmt.Errorf("device: start %s stream on %q: %w", s.dir, s.device.Name, err)
	}
	return nil
}

// endedAlready reports whether the stream's callback has run and the stream has finished.
func (s *Stream) endedAlready() bool {
	if s.callbacks.Load() == 0 {
		return false
	}
	select {
	case <-s.finished:
		return true
	default:
		return false
	}
}

// Stop ends the stream after the audio already handed to the device has played.
func (s *Stream) Stop() error { return s.end(false) }

// Abort ends the stream at once, dropping what the device still holds.
func (s *Stream) Abort() error { return s.end(true) }

func (s *Stream) end(abort bool) error {
	what := fmt.Sprintf("device: stop %s stream on %q", s.dir, s.device.Name)
	return s.bounded(what, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.pa == nil {
			return ErrClosed
		}
		s.stopping.Store(true)
		if C.Pa_IsStreamStopped(s.pa) == 1 {
			return nil
		}
		var res C.PaError
		if abort {
			res = C.Pa_AbortStream(s.pa)
		} else {
			res = C.Pa_StopStream(s.pa)
		}
		if err := paError(res); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// Close aborts the stream if it runs and releases it. Closing twice is harmless.
func (s *Stream) Close() error {
	return s.bounded(fmt.Sprintf("device: close %s stream on %q", s.dir, s.device.Name), s.close)
}

func (s *Stream) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pa == nil {
		return nil
	}
	s.stopping.Store(true)
	// End the stream before taking paLock: ending it waits for its callback thread,
	// which libpulse can deadlock for good (a capture stream whose server dies while
	// ALSA's pulse plugin holds a fragment of shared memory), and a close stuck under
	// paLock would block every later Open. Ending touches this stream alone; closing it
	// also touches PortAudio's list of open streams, so that part runs under paLock,
	// and finds the stream stopped.
	var err error
	if C.Pa_IsStreamStopped(s.pa) != 1 {
		err = paError(C.Pa_AbortStream(s.pa))
	}
	if lerr := lockPA(lockWait); lerr != nil {
		return fmt.Errorf("device: close %s stream on %q: %w", s.dir, s.device.Name, lerr)
	}
	if cerr := paError(C.Pa_CloseStream(s.pa)); cerr != nil {
		err = cerr
	}
	unlockPA()
	s.pa = nil
	// No callback runs after Pa_CloseStream returned, so the handle can go.
	s.handle.Delete()
	s.markFinished() // a stream that never started has no finished callback
	s.host.mu.Lock()
	delete(s.host.streams, s)
	s.host.mu.Unlock()
	if err != nil {
		return fmt.Errorf("device: close %s stream on %q: %w", s.dir, s.device.Name, err)
	}
	return nil
}

// bounded runs an end of the stream (f) for at most endWait. A call that does not
// return by then is left behind, and the stream is given up: later ends fail at once
// with ErrStuck, its host does not terminate PortAudio (which would wait for it), and
// Finished is closed.
func (s *Stream) bounded(what string, f func() error) error {
	if s.stuck.Load() {
		return fmt.Errorf("%s: %w", what, ErrStuck)
	}
	err := within(endWait, f)
	if errors.Is(err, ErrStuck) {
		s.stuck.Store(true)
		s.host.stuck.Store(true)
		s.stopping.Store(true)
		s.markFinished()
		return fmt.Errorf("%s: %w", what, err)
	}
	return err
}

// endWait bounds how long ending a stream or PortAudio may take: with the sound server
// gone, ALSA's pulse plugin can wait for it for good (in a drain, or a close).
const endWait = 3 * time.Second

// ErrStuck is returned (wrapped) when the audio system did not return from ending a
// stream or PortAudio within endWait.
var ErrStuck = errors.New("the audio system did not answer")

// within runs f and returns its error, or ErrStuck if f has not returned after wait
// (f then goes on running in the background).
func within(wait time.Duration, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("%w in %v", ErrStuck, wait)
	}
}

// Finished is closed when the stream has ended, for whatever reason.
func (s *Stream) Finished() <-chan struct{} { return s.finished }

// Err says why a finished stream ended: nil after Stop, Abort or Close, an error wrapping
// ErrStreamFailed when it ended on its own. It is nil while the stream runs.
func (s *Stream) Err() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Callbacks returns how many times the stream's callback has run.
func (s *Stream) Callbacks() uint64 { return s.callbacks.Load() }

// Active reports whether the stream is running (started and neither stopped nor failed).
func (s *Stream) Active() bool {
	if s.stuck.Load() {
		return false // its end holds mu for good
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pa != nil && C.Pa_IsStreamActive(s.pa) == 1
}

// StreamInfo is what PortAudio says about an open stream.
type StreamInfo struct {
	// InputLatency and OutputLatency are the host's estimate of the stream's latency.
	InputLatency, OutputLatency time.Duration
	SampleRate                  float64
}

// Info returns PortAudio's information about the open stream.
func (s *Stream) Info() StreamInfo {
	if s.stuck.Load() {
		return StreamInfo{} // its end holds mu for good
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pa == nil {
		return StreamInfo{}
	}
	i := C.Pa_GetStreamInfo(s.pa)
	if i == nil {
		return StreamInfo{}
	}
	return StreamInfo{InputLatency: seconds(i.inputLatency), OutputLatency: seconds(i.outputLatency), SampleRate: float64(i.sampleRate)}
}

// Time returns the stream's clock, the one Timing is measured on.
func (s *Stream) Time() time.Duration {
	if s.stuck.Load() {
		return 0 // its end holds mu for good
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pa == nil {
		return 0
	}
	return seconds(C.Pa_GetStreamTime(s.pa))
}

func (s *Stream) markFinished() {
	s.finishOnce.Do(func() {
		if !s.stopping.Load() && s.failure.Load() == nil {
			host := C.GoString(C.parley_host_error_text())
			err := fmt.Errorf("device: %s stream on %q: %w", s.dir, s.device.Name, ErrStreamFailed)
			if host != "" {
				err = fmt.Errorf("device: %s stream on %q: %w (last host error: %s)", s.dir, s.device.Name, ErrStreamFailed, host)
			}
			s.failure.Store(&err)
		}
		close(s.finished)
		if s.onFinish != nil {
			s.onFinish()
		}
	})
}

// PortAudio callback results.
const (
	paContinue = C.paContinue
	paAbort    = C.paAbort
)

//export parleyStreamCallback
func parleyStreamCallback(in, out unsafe.Pointer, frames C.ulong, adc, cur, dac C.double, flags C.ulong, handle C.uintptr_t) (result C.int) {
	s, ok := cgo.Handle(handle).Value().(*Stream)
	if !ok {
		return paAbort
	}
	defer func() {
		// A panic must not unwind into C. It ends the stream with an error that the
		// owner sees through Finished and Err.
		if r := recover(); r != nil {
			err := fmt.Errorf("device: %s stream on %q: %w: callback panicked: %v", s.dir, s.device.Name, ErrStreamFailed, r)
			s.failure.CompareAndSwap(nil, &err)
			result = paAbort
		}
	}()
	s.callbacks.Add(1)
	n := int(frames)
	t := Timing{InputADC: seconds(C.PaTime(adc)), Current: seconds(C.PaTime(cur)), OutputDAC: seconds(C.PaTime(dac))}
	if s.dir == Input {
		var buf []float32
		if in != nil {
			buf = unsafe.Slice((*float32)(in), n*s.channels)
		}
		s.input(buf, n, t, Flags(flags))
	} else {
		buf := unsafe.Slice((*float32)(out), n*s.channels)
		s.output(buf, n, t, Flags(flags))
	}
	return paContinue
}

//export parleyStreamFinished
func parleyStreamFinished(handle C.uintptr_t) {
	if s, ok := cgo.Handle(handle).Value().(*Stream); ok {
		s.markFinished()
	}
}
