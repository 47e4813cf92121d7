package espeak

/*
#cgo pkg-config: espeak-ng
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <espeak-ng/speak_lib.h>
#include <espeak-ng/espeak_ng.h>

// Implemented in Go (callback.go). The job handle travels through espeak's user_data.
extern int parleyEspeakPiece(uintptr_t job, short *wav, int n, espeak_EVENT *events);

// espeak hands every buffer to one process-wide callback; the job it belongs to is the
// user_data of its events (the terminating event always carries it, so events[0] does).
static int parley_synth_callback(short *wav, int n, espeak_EVENT *events) {
	return parleyEspeakPiece((uintptr_t)events->user_data, wav, n, events);
}

static void parley_install_callback(void) {
	espeak_SetSynthCallback(parley_synth_callback);
}

static espeak_ng_STATUS parley_synthesize(const char *text, size_t size, unsigned int flags, uintptr_t job) {
	return espeak_ng_Synthesize(text, size, 0, POS_CHARACTER, 0, flags, NULL, (void *)job);
}

// libespeak-ng keeps all of its state in C globals, so at most one Synth may own it per
// process. The flag lives on the C side, next to the state it guards.
static int parley_owned;

static int parley_acquire(void) {
	int expected = 0;
	return __atomic_compare_exchange_n(&parley_owned, &expected, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static void parley_release(void) {
	__atomic_store_n(&parley_owned, 0, __ATOMIC_SEQ_CST);
}

// The espeak-ng command line's -v: a voice name, else the best voice for a language.
static espeak_ng_STATUS parley_set_voice(const char *name) {
	espeak_ng_STATUS status = espeak_ng_SetVoiceByName(name);
	if (status == ENS_OK)
		return status;
	espeak_VOICE spec;
	memset(&spec, 0, sizeof spec);
	spec.languages = name;
	return espeak_ng_SetVoiceByProperties(&spec);
}

*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"
)

// Defaults used when an Options field is left at zero.
const (
	DefaultVoice  = "en-us"
	DefaultRate   = 175 // words per minute (espeakRATE_NORMAL)
	DefaultPitch  = 50
	DefaultVolume = 100
	// DefaultBufferMS is the length of the buffers espeak hands to the callback. espeak
	// rounds small values up to about 49 ms at 22050 Hz, so this is also roughly the
	// smallest piece Stream delivers.
	DefaultBufferMS = 60
)

// Limits of the speech parameters (libespeak-ng's documented ranges).
const (
	MinRate   = 80
	MaxRate   = 450
	MaxPitch  = 100
	MaxVolume = 200
)

var (
	// ErrInUse is returned by New while another Synth of this process is still open:
	// libespeak-ng keeps its state in process-wide globals, so only one Synth can own it.
	ErrInUse = errors.New("espeak: libespeak-ng is already owned by another open Synth in this process (its state is global; Close that one first)")
	// ErrClosed is returned by calls on a closed Synth, and by a synthesis that Close cut short.
	ErrClosed = errors.New("espeak: synth closed")
	// ErrVoiceNotFound is wrapped by New when the voice does not exist.
	ErrVoiceNotFound = errors.New("espeak: voice not found")
	// ErrInvalidText is wrapped by Stream and Synthesize for text espeak cannot take:
	// invalid UTF-8 or a NUL byte (espeak reads a NUL-terminated C string).
	ErrInvalidText = errors.New("espeak: invalid text")
)

// StatusError is an espeak-ng status code that is not OK.
type StatusError struct {
	Op      string
	Status  uint32
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("espeak: %s: %s (status 0x%x)", e.Op, e.Message, e.Status)
}

// Is lets errors.Is match ErrVoiceNotFound for the voice-not-found statuses.
func (e *StatusError) Is(target error) bool {
	if target != ErrVoiceNotFound {
		return false
	}
	switch e.Status {
	case C.ENS_VOICE_NOT_FOUND, C.ENS_MBROLA_VOICE_NOT_FOUND, C.ENS_MBROLA_NOT_FOUND:
		return true
	}
	return false
}

func statusError(op string, status C.espeak_ng_STATUS) error {
	if status == C.ENS_OK {
		return nil
	}
	var buf [512]C.char
	C.espeak_ng_GetStatusCodeMessage(status, &buf[0], C.size_t(len(buf)))
	return &StatusError{Op: op, Status: uint32(status), Message: C.GoString(&buf[0])}
}

// Options configure a Synth. Zero values mean the defaults above.
type Options struct {
	// Voice is an espeak-ng voice name or identifier ("en-us", "en-gb", "fr", ...),
	// resolved the way the espeak-ng command line's -v resolves it.
	Voice string
	// Rate is the speaking rate in words per minute (80–450).
	Rate int
	// Pitch is the base pitch, 1–100 (0 means the default 50).
	Pitch int
	// Volume is the amplitude, 1–200 (0 means the default 100).
	Volume int
	// DataPath is the directory that contains espeak-ng-data; empty means the library's
	// built-in location.
	DataPath string
	// BufferMS is the length in milliseconds of the buffers espeak hands back while it
	// synthesises (DefaultBufferMS when zero).
	BufferMS int
	// NoEndPause drops the pause espeak adds after the last clause of a text. The default
	// (false) keeps it, as the espeak-ng command line does.
	NoEndPause bool
}

func (o Options) withDefaults() (Options, error) {
	if o.Voice == "" {
		o.Voice = DefaultVoice
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Pitch == 0 {
		o.Pitch = DefaultPitch
	}
	if o.Volume == 0 {
		o.Volume = DefaultVolume
	}
	if o.BufferMS == 0 {
		o.BufferMS = DefaultBufferMS
	}
	switch {
	case o.Rate < MinRate || o.Rate > MaxRate:
		return o, fmt.Errorf("espeak: rate %d outside %d–%d words per minute", o.Rate, MinRate, MaxRate)
	case o.Pitch < 0 || o.Pitch > MaxPitch:
		return o, fmt.Errorf("espeak: pitch %d outside 0–%d", o.Pitch, MaxPitch)
	case o.Volume < 0 || o.Volume > MaxVolume:
		return o, fmt.Errorf("espeak: volume %d outside 0–%d", o.Volume, MaxVolume)
	case o.BufferMS < 0 || o.BufferMS > 1000:
		return o, fmt.Errorf("espeak: buffer length %d ms outside 1–1000", o.BufferMS)
	case strings.IndexByte(o.Voice, 0) >= 0 || strings.IndexByte(o.DataPath, 0) >= 0:
		return o, errors.New("espeak: voice or data path contains a NUL byte")
	}
	return o, nil
}

// WordEvent is espeak's report that a word starts.
type WordEvent struct {
	// CharStart and CharEnd are the word's byte span in the synthesised text, on rune
	// boundaries. Where espeak reports a word length of zero (it does so for some words
	// after quotation marks), CharEnd is extended over the letters, marks, digits and
	// in-word apostrophes that follow CharStart.
	CharStart, CharEnd int
	// Sample is the position in the text's PCM where the word starts.
	Sample int
	// Position and Length are what espeak reported: Position is the 1-based index of the
	// word's first character, Length its length in characters (code points).
	Position, Length int
	// Number is espeak's word number.
	Number int
}

// BoundaryKind says what a Boundary marks.
type BoundaryKind uint8

const (
	// SentenceStart marks the start of a sentence.
	SentenceStart BoundaryKind = iota + 1
	// ClauseEnd marks the end of a clause or sentence (after its pause, in espeak's
	// placement).
	ClauseEnd
)

func (k BoundaryKind) String() string {
	switch k {
	case SentenceStart:
		return "sentence"
	case ClauseEnd:
		return "end"
	}
	return fmt.Sprintf("boundary(%d)", uint8(k))
}

// Boundary is a sentence or clause event.
type Boundary struct {
	Kind BoundaryKind
	// Sample is the position in the PCM.
	Sample int
	// Char is the byte offset in the text (clamped to the text), and Position espeak's
	// 1-based character position.
	Char, Position int
	// Number is espeak's sentence or clause number.
	Number int
}

// Piece is one buffer of a streaming synthesis, with the events espeak reported with it.
// espeak reports an event together with the buffer whose samples it falls in (or at
// whose end it lies), so a Piece's events have Start <= Sample <= Start+len(Samples).
type Piece struct {
	// Start is the position of Samples[0] in the text's PCM.
	Start int
	// Samples are mono 16-bit PCM at the Synth's SampleRate. The slice belongs to the
	// receiver.
	Samples    []int16
	Words      []WordEvent
	Boundaries []Boundary
}

// Result is a whole synthesis.
type Result struct {
	SampleRate int
	Samples    []int16
	Words      []WordEvent
	Boundaries []Boundary
}

// Voice describes an installed espeak-ng voice.
type Voice struct {
	Name       string
	Identifier string
	// Languages are the language tags the voice speaks, most preferred first.
	Languages []string
	Gender    int // 0 unknown, 1 male, 2 female
}

// Synth owns libespeak-ng for the process. One goroutine, locked to its OS thread, makes
// every call into the library; the methods hand it work and wait, so a Synth may be used
// from any number of goroutines, and their syntheses run one after another.
//
// libespeak-ng keeps its state in C globals, some of which even outlive espeak_Terminate
// (the pitch-flutter phase in wavegen.c, for one), so the audio for a text depends by a
// few samples on what the process synthesised before. Two processes that make the same
// calls in the same order produce identical audio.
type Synth struct {
	opts  Options
	rate  int
	jobs  chan *job
	calls chan func()
	quit  chan struct{} // closed by Close
	done  chan struct{} // closed when the owner goroutine has terminated the library

	closeOnce sync.Once
}

// New initialises libespeak-ng with opts. It fails with ErrInUse while another Synth is
// open in the process.
func New(opts Options) (*Synth, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.DataPath != "" {
		// The library silently falls back to its built-in location for a path that is
		// not a directory; a configured path that is wrong should be an error.
		if st, err := os.Stat(opts.DataPath); err != nil {
			return nil, fmt.Errorf("espeak: data path: %w", err)
		} else if !st.IsDir() {
			return nil, fmt.Errorf("espeak: data path %s is not a directory", opts.DataPath)
		}
	}
	if C.parley_acquire() == 0 {
		return nil, ErrInUse
	}
	s := &Synth{
		opts:  opts,
		jobs:  make(chan *job),
		calls: make(chan func()),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	ready := make(chan error, 1)
	go s.own(ready)
	if err := <-ready; err != nil {
		<-s.done
		return nil, err
	}
	return s, nil
}

// own is the owner goroutine: it initialises the library, serves jobs until Close, and
// terminates the library.
func (s *Synth) own(ready chan<- error) {
	// libespeak-ng is not safe for concurrent use, and in synchronous mode it runs the
	// callback on the calling thread; making every call from one OS thread means nothing
	// depends on what the library may keep per thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(s.done)
	defer C.parley_release()

	if err := s.initialise(); err != nil {
		C.espeak_ng_Terminate()
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case j := <-s.jobs:
			s.run(j)
		case fn := <-s.calls:
			fn()
		case <-s.quit:
			C.espeak_ng_Terminate()
			return
		}
	}
}

func (s *Synth) initialise() error {
	var path *C.char
	if s.opts.DataPath != "" {
		path = C.CString(s.opts.DataPath)
		defer C.free(unsafe.Pointer(path))
	}
	C.espeak_ng_InitializePath(path)
	var ectx C.espeak_ng_ERROR_CONTEXT
	status := C.espeak_ng_Initialize(&ectx)
	C.espeak_ng_ClearErrorContext(&ectx)
	op := "initialise"
	if s.opts.DataPath != "" {
		op += " with data in " + s.opts.DataPath
	}
	if err := statusError(op, status); err != nil {
		return err
	}
	if err := statusError("initialise output", C.espeak_ng_InitializeOutput(C.ENOUTPUT_MODE_SYNCHRONOUS, C.int(s.opts.BufferMS), nil)); err != nil {
		return err
	}
	s.rate = int(C.espeak_ng_GetSampleRate())
	if s.rate <= 0 {
		return fmt.Errorf("espeak: library reports sample rate %d", s.rate)
	}
	C.parley_install_callback()

	if err := checkVoice(s.opts.Voice); err != nil {
		return err
	}
	voice := C.CString(s.opts.Voice)
	defer C.free(unsafe.Pointer(voice))
	if err := statusError("voice "+s.opts.Voice, C.parley_set_voice(voice)); err != nil {
		return err
	}
	// Parameters after the voice: selecting a voice may reset them.
	params := []struct {
		name  string
		param C.espeak_PARAMETER
		value int
	}{
		{"rate", C.espeakRATE, s.opts.Rate},
		{"pitch", C.espeakPITCH, s.opts.Pitch},
		{"volume", C.espeakVOLUME, s.opts.Volume},
	}
	for _, p := range params {
		if err := statusError("set "+p.name, C.espeak_ng_SetParameter(p.param, C.int(p.value), 0)); err != nil {
			return err
		}
	}
	return nil
}

// SampleRate returns the rate of the PCM the Synth produces (22050 Hz for espeak-ng's
// own voices).
func (s *Synth) SampleRate() int { return s.rate }

// Options returns the options in effect, defaults filled in.
func (s *Synth) Options() Options { return s.opts }

// Close terminates the library after aborting a synthesis in progress; afterwards New may
// be called again. Close is safe to call more than once.
func (s *Synth) Close() error {
	s.closeOnce.Do(func() { close(s.quit) })
	<-s.done
	return nil
}

// do runs fn on the owner goroutine.
func (s *Synth) do(ctx context.Context, fn func()) error {
	finished := make(chan struct{})
	wrapped := func() { fn(); close(finished) }
	select {
	case s.calls <- wrapped:
	case <-s.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	<-finished
	return nil
}

// Voices lists the installed voices.
func (s *Synth) Voices(ctx context.Context) ([]Voice, error) {
	var out []Voice
	err := s.do(ctx, func() { out = listVoices(C.espeak_ListVoices(nil)) })
	return out, err
}

// parseLanguages reads espeak's language list: entries of one priority byte and a
// NUL-terminated name, ended by an empty name.
func parseLanguages(p *C.char) []string {
	if p == nil {
		return nil
	}
	var out []string
	for i := 0; i < 64; i++ {
		if *p == 0 { // priority byte 0 would be odd, but ends the list safely
			break
		}
		p = (*C.char)(unsafe.Add(unsafe.Pointer(p), 1)) // skip the priority byte
		name := C.GoString(p)
		if name == "" {
			break
		}
		out = append(out, name)
		p = (*C.char)(unsafe.Add(unsafe.Pointer(p), len(name)+1))
	}
	return out
}

// Synthesize speaks text and returns all of its audio and events.
func (s *Synth) Synthesize(ctx context.Context, text string) (Result, error) {
	res := Result{SampleRate: s.rate}
	err := s.Stream(ctx, text, func(p Piece) error {
		res.Samples = append(res.Samples, p.Samples...)
		res.Words = append(res.Words, p.Words...)
		res.Boundaries = append(res.Boundaries, p.Boundaries...)
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// Stream speaks text and calls fn with each piece of audio as espeak produces it, on the
// calling goroutine, so the first audio is available long before the text is finished.
// An error from fn, the end of ctx or Close aborts the synthesis before the next piece;
// Stream then returns that error (ErrClosed for Close).
//
// text is UTF-8; word positions are reported as byte offsets into it. It is spoken as
// plain text: no SSML, no [[phoneme]] input.
func (s *Synth) Stream(ctx context.Context, text string, fn func(Piece) error) error {
	if !utf8.ValidString(text) {
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidText)
	}
	if strings.IndexByte(text, 0) >= 0 {
		return fmt.Errorf("%w: contains a NUL byte", ErrInvalidText)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := make(chan struct{})
	j := &job{
		text:   text,
		chars:  charOffsets(text),
		pieces: make(chan Piece),
		stop:   stop,
		quit:   s.quit,
		done:   make(chan error, 1),
	}
	select {
	case s.jobs <- j:
	case <-s.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}

	var abortErr error
	ctxDone := ctx.Done()
	abort := func(err error) {
		if abortErr == nil {
			abortErr = err
			close(stop)
		}
		ctxDone = nil
	}
	for {
		select {
		case p := <-j.pieces:
			if abortErr == nil {
				if err := fn(p); err != nil {
					abort(err)
				}
			}
		case err := <-j.done:
			// The owner sends done after its last piece was taken, so nothing is lost.
			if abortErr != nil {
				return abortErr
			}
			return err
		case <-ctxDone:
			abort(ctx.Err())
		}
	}
}

// job is one synthesis, shared between the caller of Stream and the owner goroutine
// (which alone runs the callback that fills it).
type job struct {
	text   string
	chars  []int // byte offset of every character, plus len(text)
	pieces chan Piece
	stop   <-chan struct{} // closed by the caller to abort
	quit   <-chan struct{} // closed by Close
	done   chan error

	pos     int  // samples delivered so far (owner goroutine only)
	stopped bool // the callback asked espeak to abort
	closed  bool // ... because of Close
}

// run performs j on the owner goroutine.
func (s *Synth) run(j *job) {
	text := C.CString(j.text)
	defer C.free(unsafe.Pointer(text))
	h := cgo.NewHandle(j)
	defer h.Delete()

	flags := C.uint(C.espeakCHARS_UTF8)
	if !s.opts.NoEndPause {
		flags |= C.espeakENDPAUSE
	}
	status := C.parley_synthesize(text, C.size_t(len(j.text)+1), flags, C.uintptr_t(h))
	var err error
	switch {
	case j.closed:
		err = ErrClosed
	case j.stopped:
		err = nil // the caller knows why it stopped
	default:
		err = statusError("synthesize", status)
	}
	j.done <- err
}

// piece handles one callback from espeak; it returns 1 to make espeak abort.
func (j *job) piece(wav *C.short, n C.int, events *C.espeak_EVENT) C.int {
	if j.stopped {
		return 1
	}
	p := Piece{Start: j.pos}
	if wav != nil && n > 0 {
		p.Samples = make([]int16, int(n))
		copy(p.Samples, unsafe.Slice((*int16)(unsafe.Pointer(wav)), int(n)))
		j.pos += int(n)
	}
	if events != nil {
		// The list ends with an event of type espeakEVENT_LIST_TERMINATED; the bound only
		// guards against a corrupt list.
		for _, ev := range unsafe.Slice(events, 1<<16) {
			if ev._type == C.espeakEVENT_LIST_TERMINATED {
				break
			}
			j.event(&p, &ev)
		}
	}
	if len(p.Samples) == 0 && len(p.Words) == 0 && len(p.Boundaries) == 0 {
		return 0
	}
	select {
	case j.pieces <- p:
		return 0
	case <-j.stop:
	case <-j.quit:
		j.closed = true
	}
	j.stopped = true
	return 1
}

func (j *job) event(p *Piece, ev *C.espeak_EVENT) {
	pos, length, sample := int(ev.text_position), int(ev.length), int(ev.sample)
	number := int(*(*C.int)(unsafe.Pointer(&ev.id)))
	switch ev._type {
	case C.espeakEVENT_WORD:
		start, end := wordSpan(j.text, j.chars, pos, length)
		p.Words = append(p.Words, WordEvent{CharStart: start, CharEnd: end, Sample: sample, Position: pos, Length: length, Number: number})
	case C.espeakEVENT_SENTENCE:
		p.Boundaries = append(p.Boundaries, Boundary{Kind: SentenceStart, Sample: sample, Char: charAt(j.chars, pos), Position: pos, Number: number})
	case C.espeakEVENT_END:
		p.Boundaries = append(p.Boundaries, Boundary{Kind: ClauseEnd, Sample: sample, Char: charAt(j.chars, pos), Position: pos, Number: number})
	}
}
