package pipeline

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/turntaking"
)

// Upper bounds of settings whose size the agent allocates or waits on.
const (
	// MaxContext is the largest llm.context accepted before a model is loaded; the
	// model's training context and the memory a context of that size needs bound it
	// further when the engine loads (CheckContext).
	MaxContext = 1 << 20
	// MaxReplyTokens bounds llm.max_tokens (a reply, never more than a context).
	MaxReplyTokens = MaxContext
	// maxFrame and maxDeviceLatency bound the audio settings: a frame or a latency is
	// allocated as samples.
	maxFrame         = time.Second
	maxDeviceLatency = 2 * time.Second
)

// Validate reports every setting that cannot work, each with its key and the range it
// must lie in. Floats must be finite (NaN and ±Inf are refused wherever they appear).
// What only a loaded engine can tell (a voice espeak-ng has, a context the model and
// the memory hold) is checked when the engines load; threads beyond the machine's cores
// are capped there (ThreadPlan).
func (c Config) Validate() error {
	var errs []error
	add := func(section string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", section, err))
		}
	}
	errs = append(errs, nonFinite(reflect.ValueOf(c), "")...)
	switch c.Pipeline {
	case Predictive, Incremental, TurnBased:
	default:
		add("pipeline", fmt.Errorf("%q (want %s)", c.Pipeline, strings.Join(Pipelines, ", ")))
	}
	if pipelineSettings(c).predictTurnEnd {
		add("end_of_turn", c.EndOfTurn.Validate())
	}
	if c.TurnTaking.Prepare.After < 0 {
		add("turn_taking.prepare", errors.New("after must not be negative"))
	}
	add("turn_taking.barge_in", validBargeIn(c.TurnTaking.BargeIn))
	if c.Overlap.Enabled {
		add("overlap", c.Overlap.Validate())
	}
	add("vad", c.VAD.Validate())
	add("tts", c.TTS.Validate())
	errs = append(errs, validEngines(c)...)
	add("asr", c.ASR.Validate())
	add("llm", c.LLM.validate())
	if c.Cores < 0 {
		add("cores", fmt.Errorf("%d must not be negative (0: the machine's logical CPUs)", c.Cores))
	}
	add("dialogue", c.Dialogue.validate())
	b := c.TurnTaking.BargeIn
	if b.MinDuration < 0 || b.Grace < 0 || b.MinWords < 0 || b.EarlyWords < 0 || c.TurnTaking.Reengage.After < 0 || c.TurnTaking.Reengage.Max < 0 || c.TurnTaking.Unheard.MinSpeech < 0 {
		add("turn_taking", errors.New("durations and counts (barge_in.min_duration, grace, min_words, early_words, reengage.after, reengage.max, unheard.min_speech) must not be negative"))
	}
	add("audio", c.Audio.validate())
	if err := dialogue.ValidSessionName(c.Session.Name); c.Session.Name != "" && err != nil {
		add("session.name", err)
	}
	if err := c.Logging.Validate(); err != nil {
		add("logging", err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

// validate checks the llm section.
func (l LLMConfig) validate() error {
	var errs []error
	ints := []struct {
		key     string
		v, max  int
		meaning string
	}{
		{"context", l.Context, MaxContext, "0: the model's, at most 4096; it is checked against the model and the memory when it loads"},
		{"max_tokens", l.MaxTokens, MaxReplyTokens, "0: until the model stops"},
		{"threads", l.Threads, math.MaxInt32, "0: the thread plan's; more than the cores are capped"},
		{"threads_batch", l.ThreadsBatch, math.MaxInt32, "0: the thread plan's; more than the cores are capped"},
		{"top_k", l.TopK, math.MaxInt32, "0: off"},
		{"clause_max_words", l.ClauseMaxWords, math.MaxInt32, "0: no limit"},
		{"first_clause_max_words", l.FirstClauseMaxWords, math.MaxInt32, "0: clause_max_words"},
	}
	for _, n := range ints {
		if n.v < 0 || n.v > n.max {
			errs = append(errs, fmt.Errorf("%s %d is not in 0–%d (%s)", n.key, n.v, n.max, n.meaning))
		}
	}
	if l.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v must not be negative (0: 60s)", l.Timeout))
	}
	// Written so that NaN, which fails every comparison, is out of range too.
	floats := []struct {
		key     string
		v, max  float32
		meaning string
	}{
		{"temperature", l.Temperature, math.MaxFloat32, "0: greedy"},
		{"top_p", l.TopP, 1, "0 or 1: off"},
		{"min_p", l.MinP, 1, "0: off"},
		{"repeat_penalty", l.RepeatPenalty, math.MaxFloat32, "0 or 1: off"},
	}
	for _, f := range floats {
		if !(f.v >= 0 && f.v <= f.max) {
			want := fmt.Sprintf("0 to %g", f.max)
			if f.max == math.MaxFloat32 {
				want = "a finite number ≥ 0"
			}
			errs = append(errs, fmt.Errorf("%s %g is not in range (want %s; %s)", f.key, f.v, want, f.meaning))
		}
	}
	return errors.Join(errs...)
}

// validate checks the dialogue section.
func (d DialogueConfig) validate() error {
	var errs []error
	if d.PromptFormat == "" {
		errs = append(errs, errors.New("prompt_format is required"))
	} else if _, err := dialogue.LoadFormat(d.PromptFormat); err != nil {
		errs = append(errs, err)
	}
	switch d.Memory.Strategy {
	case "", "buffer", "summary":
	case "window":
		if d.Memory.Window < 1 {
			errs = append(errs, fmt.Errorf("memory.window %d: a window memory needs window ≥ 1", d.Memory.Window))
		}
	case "summary-buffer":
		if d.Memory.TokenLimit < 1 {
			errs = append(errs, fmt.Errorf("memory.token_limit %d: a summary-buffer memory needs token_limit ≥ 1", d.Memory.TokenLimit))
		}
	default:
		errs = append(errs, fmt.Errorf("memory.strategy %q (want buffer, window, summary or summary-buffer)", d.Memory.Strategy))
	}
	if f := d.MinWordFraction; !(f >= 0 && f <= 1) {
		errs = append(errs, fmt.Errorf("min_word_fraction %g is not in [0, 1]", f))
	}
	if d.ReplyReserve < 0 || d.ReplyReserve > MaxContext {
		errs = append(errs, fmt.Errorf("reply_reserve %d is not in 0–%d", d.ReplyReserve, MaxContext))
	}
	return errors.Join(errs...)
}

// validate checks the audio section.
func (a AudioConfig) validate() error {
	var errs []error
	if a.Frame < 0 || a.Frame > maxFrame {
		errs = append(errs, fmt.Errorf("frame %v is not in 0–%v (0: 20ms)", a.Frame, maxFrame))
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"output_latency", a.OutputLatency}, {"input_latency", a.InputLatency}} {
		if d.v < 0 || d.v > maxDeviceLatency {
			errs = append(errs, fmt.Errorf("%s %v is not in 0–%v (0: the device's)", d.key, d.v, maxDeviceLatency))
		}
	}
	if _, err := aec.ParseMode(a.EchoCancel); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validBargeIn checks the soft barge-in settings.
func validBargeIn(b turntaking.BargeInConfig) error {
	switch b.Hold {
	case "", turntaking.HoldDuck, turntaking.HoldPause:
	default:
		return fmt.Errorf("hold %q (want %s or %s)", b.Hold, turntaking.HoldDuck, turntaking.HoldPause)
	}
	if !(b.DuckGain <= 0 && b.DuckGain >= -60) {
		return fmt.Errorf("duck_gain %g dB (want -60 to 0)", b.DuckGain)
	}
	if !(b.MinStability >= 0 && b.MinStability <= 1) {
		return fmt.Errorf("min_stability %g (want 0 to 1)", b.MinStability)
	}
	backs, interrupts := b.WordLists()
	if len(backs) == 0 || len(interrupts) == 0 {
		return fmt.Errorf("no backchannels or interrupt words for language %q: list them (backchannels, interrupt_words)", b.Language)
	}
	e := b.Evidence
	for _, c := range []struct {
		key string
		v   float32
	}{
		{"keyword_confidence", e.KeywordConfidence}, {"word_confidence", e.WordConfidence},
		{"turn_word_confidence", e.TurnWordConfidence}, {"backchannel_confidence", e.BackchannelConfidence},
		{"doubt_confidence", e.DoubtConfidence}, {"repeat_confidence", e.RepeatConfidence},
	} {
		if !(c.v >= 0 && c.v <= 1) {
			return fmt.Errorf("evidence.%s %g (want 0 to 1)", c.key, c.v)
		}
	}
	if e.KeywordSound < 0 || e.Rejoin < 0 || b.MaxBackchannel < 0 || b.YieldWindow < 0 || b.ContinueWindow < 0 {
		return errors.New("durations (evidence.keyword_sound, evidence.rejoin, max_backchannel, yield_window, continue_window) must not be negative")
	}
	return nil
}

// nonFinite returns an error for every float in v (a Config, walked through its
// sections, lists and maps) that is NaN or infinite, named by its YAML key. The
// sections' own checks name the ranges; this one makes sure no float escapes them.
func nonFinite(v reflect.Value, key string) []error {
	switch v.Kind() {
	case reflect.Struct:
		var errs []error
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" {
				continue
			}
			sub := key
			switch {
			case strings.Contains(opts, "inline"):
			case name != "":
				sub = joinKey(key, name)
			default:
				sub = joinKey(key, strings.ToLower(f.Name))
			}
			errs = append(errs, nonFinite(v.Field(i), sub)...)
		}
		return errs
	case reflect.Slice, reflect.Array:
		var errs []error
		for i := range v.Len() {
			errs = append(errs, nonFinite(v.Index(i), fmt.Sprintf("%s[%d]", key, i))...)
		}
		return errs
	case reflect.Map:
		var errs []error
		iter := v.MapRange()
		for iter.Next() {
			errs = append(errs, nonFinite(iter.Value(), joinKey(key, fmt.Sprint(iter.Key().Interface())))...)
		}
		return errs
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return nonFinite(v.Elem(), key)
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return []error{fmt.Errorf("%s: %g is not a finite number", key, f)}
		}
	}
	return nil
}

func joinKey(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}
