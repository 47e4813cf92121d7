package pocketsphinx

/*
#include <stdlib.h>
#include <pocketsphinx.h>
*/
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"github.com/parley-voice/parley/internal/regularfile"
)

// Config selects the models and options of a Decoder. Empty fields keep pocketsphinx's
// defaults, which on Debian are the US English model of pocketsphinx-en-us.
type Config struct {
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
}

// DefaultModel returns the paths of the US English model below DefaultModelDir.
func DefaultModel() (hmm, lm, dict string) {
	dir := DefaultModelDir() + "/en-us"
	return dir + "/en-us", dir + "/en-us.lm.bin", dir + "/cmudict-en-us.dict"
}

// Decoder is a pocketsphinx decoder. It is not safe for concurrent use.
type Decoder struct {
	ps      *C.ps_decoder_t
	frate   int
	inUtt   bool
	scratch []int16
}

// NewDecoder loads the models and returns a decoder ready for StartUtt.
func NewDecoder(cfg Config) (*Decoder, error) {
	conf := C.ps_config_init(nil)
	if conf == nil {
		return nil, errors.New("pocketsphinx: could not create a configuration")
	}
	// The decoder retains its own reference to the configuration.
	defer C.ps_config_free(conf)
	C.ps_default_search_args(conf)

	// Parley's defaults first, then the raw options, then the named fields.
	set := map[string]any{"samprate": 16000, "loglevel": "ERROR"}
	for k, v := range cfg.Options {
		set[k] = v
	}
	if cfg.HMM != "" {
		set["hmm"] = cfg.HMM
	}
	if cfg.LM != "" {
		set["lm"] = cfg.LM
	}
	if cfg.Dict != "" {
		set["dict"] = cfg.Dict
	}
	if cfg.SampleRate > 0 {
		set["samprate"] = cfg.SampleRate
	}
	if cfg.LogLevel != "" {
		set["loglevel"] = strings.ToUpper(cfg.LogLevel)
	}
	if err := checkModelPaths(set); err != nil {
		return nil, fmt.Errorf("pocketsphinx: %w", err)
	}
	js, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("pocketsphinx: options: %w", err)
	}
	cjs := C.CString(string(js))
	defer C.free(unsafe.Pointer(cjs))
	if C.ps_config_parse_json(conf, cjs) == nil {
		return nil, fmt.Errorf("pocketsphinx: invalid options %s", js)
	}
	ps := C.ps_init(conf)
	if ps == nil {
		return nil, fmt.Errorf("pocketsphinx: could not initialise the decoder (models %s, %s, %s)",
			configStr(conf, "hmm"), configStr(conf, "lm"), configStr(conf, "dict"))
	}
	frate := C.CString("frate")
	defer C.free(unsafe.Pointer(frate))
	d := &Decoder{ps: ps, frate: int(C.ps_config_int(C.ps_get_config(ps), frate))}
	if d.frate <= 0 {
		d.frate = 100
	}
	return d, nil
}

// checkModelPaths refuses model paths that would hang pocketsphinx in open() (a FIFO or
// a device): the acoustic model directory and every option naming a file it reads.
func checkModelPaths(set map[string]any) error {
	if dir, ok := set["hmm"].(string); ok && dir != "" {
		if err := regularfile.CheckDir(dir); err != nil {
			return fmt.Errorf("acoustic model: %w", err)
		}
	}
	for _, name := range [...]string{"lm", "dict", "fdict", "jsgf", "fsg", "kws", "lmctl", "mllr", "lda",
		"featparams", "mdef", "tmat", "mean", "var", "mixw", "sendump"} {
		if p, ok := set[name].(string); ok && p != "" {
			if err := regularfile.Check(p); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	return nil
}

// CMN returns the current cepstral mean (pocketsphinx's estimate of the channel), as
// comma-separated numbers. With live CMN (the default) it adapts as audio is decoded and
// carries over from one utterance to the next.
func (d *Decoder) CMN() string {
	if d.ps == nil {
		return ""
	}
	return C.GoString(C.ps_get_cmn(d.ps, 0))
}

// SetCMN sets the cepstral mean, for example to one CMN returned earlier.
func (d *Decoder) SetCMN(cmn string) error {
	if d.ps == nil {
		return ErrClosed
	}
	c := C.CString(cmn)
	defer C.free(unsafe.Pointer(c))
	if C.ps_set_cmn(d.ps, c) < 0 {
		return fmt.Errorf("pocketsphinx: invalid cepstral mean %q", cmn)
	}
	return nil
}

// ResetFeatures rebuilds the feature computation (the cepstral mean included) from the
// configuration, without reloading the models.
func (d *Decoder) ResetFeatures() error {
	if d.ps == nil {
		return ErrClosed
	}
	if d.inUtt {
		return errors.New("pocketsphinx: ResetFeatures inside an utterance")
	}
	if C.ps_reinit_feat(d.ps, nil) < 0 {
		return errors.New("pocketsphinx: ps_reinit_feat failed")
	}
	return nil
}

func configStr(conf *C.ps_config_t, name string) string {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return C.GoString(C.ps_config_str(conf, cname))
}

// SetAlignText makes the decoder align the next utterances to words (whitespace-separated
// words of the dictionary) instead of recognising them: Words after EndUtt then gives
// where each word lies, with silences between them. It fails when a word is not in the
// dictionary. The decoder stays aligning until it is closed.
func (d *Decoder) SetAlignText(words string) error {
	if d.ps == nil {
		return ErrClosed
	}
	if d.inUtt {
		return errors.New("pocketsphinx: SetAlignText inside an utterance")
	}
	c := C.CString(words)
	defer C.free(unsafe.Pointer(c))
	if C.ps_set_align_text(d.ps, c) < 0 {
		return fmt.Errorf("pocketsphinx: cannot align to %q (a word the dictionary lacks?)", words)
	}
	return nil
}

// ErrClosed is returned by methods called after Close.
var ErrClosed = errors.New("pocketsphinx: use after Close")

// StartUtt begins an utterance, ending one still open.
func (d *Decoder) StartUtt() error {
	if d.ps == nil {
		return ErrClosed
	}
	if d.inUtt {
		if err := d.EndUtt(); err != nil {
			return err
		}
	}
	if C.ps_start_utt(d.ps) < 0 {
		return errors.New("pocketsphinx: ps_start_utt failed")
	}
	d.inUtt = true
	return nil
}

// Process decodes 16-bit PCM samples of the current utterance. fullUtt says the samples
// are the whole utterance, which lets pocketsphinx normalise over all of it at once.
func (d *Decoder) Process(samples []int16, fullUtt bool) error {
	if d.ps == nil {
		return ErrClosed
	}
	if !d.inUtt {
		return errors.New("pocketsphinx: Process outside an utterance")
	}
	if len(samples) == 0 {
		return nil
	}
	full := C.int(0)
	if fullUtt {
		full = 1
	}
	rc := C.ps_process_raw(d.ps, (*C.int16)(unsafe.Pointer(&samples[0])), C.size_t(len(samples)), 0, full)
	runtime.KeepAlive(samples)
	if rc < 0 {
		return fmt.Errorf("pocketsphinx: ps_process_raw failed (%d)", int(rc))
	}
	return nil
}

// ProcessFloat is Process for float samples in [-1, 1], converted to 16-bit PCM as a
// 16-bit WAV file would hold them (so 16-bit audio round-trips exactly).
func (d *Decoder) ProcessFloat(samples []float32) error {
	d.scratch = FloatToPCM16(d.scratch[:0], samples)
	return d.Process(d.scratch, false)
}

// FloatToPCM16 appends samples converted to 16-bit PCM to dst.
func FloatToPCM16(dst []int16, samples []float32) []int16 {
	for _, s := range samples {
		v := math.Round(float64(s) * 32768)
		switch {
		case v > math.MaxInt16:
			v = math.MaxInt16
		case v < math.MinInt16:
			v = math.MinInt16
		case v != v: // NaN
			v = 0
		}
		dst = append(dst, int16(v))
	}
	return dst
}

// EndUtt ends the utterance; Hyp and Words then give the final result.
func (d *Decoder) EndUtt() error {
	if d.ps == nil {
		return ErrClosed
	}
	if !d.inUtt {
		return nil
	}
	d.inUtt = false
	if C.ps_end_utt(d.ps) < 0 {
		return errors.New("pocketsphinx: ps_end_utt failed")
	}
	return nil
}

// InUtterance reports whether an utterance is open.
func (d *Decoder) InUtterance() bool { return d.inUtt }

// Hyp returns the best hypothesis so far: partial during an utterance, final after EndUtt.
func (d *Decoder) Hyp() string {
	if d.ps == nil {
		return ""
	}
	h := C.ps_get_hyp(d.ps, nil)
	if h == nil {
		return ""
	}
	return C.GoString(h)
}

// Word is a word of the best hypothesis with its place in the utterance.
type Word struct {
	// Text is the dictionary word without its alternate-pronunciation suffix ("(2)").
	Text string
	// Start and End are relative to the start of the utterance.
	Start, End time.Duration
	// Prob is the word's posterior probability; pocketsphinx computes it only for final
	// results with bestpath enabled (the default) and reports 1 otherwise.
	Prob float64
	// Filler marks silence and noise tokens (<s>, </s>, <sil>, [NOISE], ...).
	Filler bool
}

// Words returns the word segmentation of the best hypothesis so far, fillers included.
func (d *Decoder) Words() []Word {
	if d.ps == nil {
		return nil
	}
	lmath := C.ps_get_logmath(d.ps)
	var out []Word
	for seg := C.ps_seg_iter(d.ps); seg != nil; seg = C.ps_seg_next(seg) {
		var sf, ef C.int
		C.ps_seg_frames(seg, &sf, &ef)
		text := C.GoString(C.ps_seg_word(seg))
		prob := float64(C.logmath_exp(lmath, C.ps_seg_prob(seg, nil, nil, nil)))
		w := Word{
			Text:   trimAlt(text),
			Start:  d.frames(int(sf)),
			End:    d.frames(int(ef) + 1), // ef is inclusive
			Prob:   prob,
			Filler: isFiller(text),
		}
		out = append(out, w)
	}
	return out
}

func (d *Decoder) frames(n int) time.Duration {
	return time.Duration(n) * time.Second / time.Duration(d.frate)
}

// trimAlt removes the "(2)" that marks an alternate pronunciation.
func trimAlt(w string) string {
	if i := strings.LastIndexByte(w, '('); i > 0 && strings.HasSuffix(w, ")") {
		return w[:i]
	}
	return w
}

func isFiller(w string) bool {
	return w == "" || strings.HasPrefix(w, "<") || strings.HasPrefix(w, "[") || strings.HasPrefix(w, "++")
}

// Close frees the decoder.
func (d *Decoder) Close() error {
	if d.ps != nil {
		C.ps_free(d.ps)
		d.ps = nil
	}
	return nil
}
