// Package metrics records per-turn latencies of a conversation (voice-to-voice, ASR final
// latency, LLM time to first token and clause, TTS first chunk, barge-in reaction) and
// summarises them as percentiles.
//
// On a virtual clock computation takes no time, so the latencies that are computation
// alone (the ASR's final decode, the LLM's first token and clause, the TTS's first chunk)
// cannot be measured there: a Turn timed on one (VirtualClock) leaves them out of its
// Latencies and lists them as Unmeasured, summaries count them without statistics, and
// WriteTable shows them as "—" (metrics.json: "unmeasured"). Voice-to-voice and barge-in
// reaction also hold what the design imposes (the end-of-turn silence, the speech the
// VAD needs, the output latency), which a virtual clock measures exactly.
package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Turn holds the clock times of one exchange: the user's turn and the agent's reply to it.
// Zero times are unknown (the step did not happen).
type Turn struct {
	UserTurn  int `json:"user_turn"`
	AgentTurn int `json:"agent_turn"`

	UserSpeechEnd time.Time `json:"-"` // when the user actually stopped speaking
	EndOfTurn     time.Time `json:"-"` // when end of turn was detected
	ASRFinal      time.Time `json:"-"` // when the final transcript was committed
	Respond       time.Time `json:"-"` // when the reply was requested
	FirstToken    time.Time `json:"-"` // when the LLM produced its first token
	FirstClause   time.Time `json:"-"` // when the first clause was complete
	FirstChunk    time.Time `json:"-"` // when the TTS produced the first audio chunk
	FirstAudible  time.Time `json:"-"` // when the listener first heard the reply

	BargeInOnset time.Time `json:"-"` // when the user started speaking over the agent
	AudioSilent  time.Time `json:"-"` // when the agent's audio went silent after that
	Interrupted  bool      `json:"interrupted"`
	// Prepared says the reply was prepared before the user's turn ended: its first token,
	// clause and chunk may come before Respond, and the LLM then cost nothing after it.
	Prepared bool `json:"prepared,omitempty"`

	// VirtualClock says the times come from a virtual clock, on which computation takes
	// no time: the latencies of computation alone are unmeasured.
	VirtualClock bool `json:"virtual_clock,omitempty"`
}

// Speculation counts the replies a predictive pipeline prepared while the user might
// still be speaking: how many were prepared, how many the end of the user's turn
// confirmed (hits), how many were withdrawn, and the tokens generated in vain.
type Speculation struct {
	Prepared     int `json:"prepared"`
	Hits         int `json:"hits"`
	Withdrawn    int `json:"withdrawn"`
	WastedTokens int `json:"wasted_tokens"`
}

// Add sums two counts.
func (s Speculation) Add(o Speculation) Speculation {
	return Speculation{s.Prepared + o.Prepared, s.Hits + o.Hits, s.Withdrawn + o.Withdrawn, s.WastedTokens + o.WastedTokens}
}

// String is one line for logs and tables.
func (s Speculation) String() string {
	return fmt.Sprintf("%d prepared, %d confirmed, %d withdrawn (%d tokens generated in vain)", s.Prepared, s.Hits, s.Withdrawn, s.WastedTokens)
}

// Latency names.
const (
	VoiceToVoice   = "voice_to_voice"
	ASRFinal       = "asr_final"
	LLMFirstToken  = "llm_first_token"
	LLMFirstClause = "llm_first_clause"
	TTSFirstChunk  = "tts_first_chunk"
	BargeIn        = "barge_in_reaction"
)

// Names lists the latencies in reporting order.
var Names = []string{VoiceToVoice, ASRFinal, LLMFirstToken, LLMFirstClause, TTSFirstChunk, BargeIn}

// Computation reports whether latency name is computation alone (a decode, a
// generation, a synthesis), which a virtual clock cannot measure.
func Computation(name string) bool {
	switch name {
	case ASRFinal, LLMFirstToken, LLMFirstClause, TTSFirstChunk:
		return true
	}
	return false
}

// spans returns the durations between the steps this turn timed, measurable or not.
func (t Turn) spans() map[string]time.Duration {
	out := map[string]time.Duration{}
	put := func(name string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() && !to.Before(from) {
			out[name] = to.Sub(from)
		}
	}
	put(VoiceToVoice, t.UserSpeechEnd, t.FirstAudible)
	put(ASRFinal, t.EndOfTurn, t.ASRFinal)
	// What a prepared reply had ready before it was asked for took no time after it.
	ready := func(at time.Time) time.Time {
		if t.Prepared && !at.IsZero() && at.Before(t.Respond) {
			return t.Respond
		}
		return at
	}
	put(LLMFirstToken, t.Respond, ready(t.FirstToken))
	put(LLMFirstClause, t.Respond, ready(t.FirstClause))
	put(TTSFirstChunk, t.FirstClause, t.FirstChunk)
	put(BargeIn, t.BargeInOnset, t.AudioSilent)
	return out
}

// Latencies returns the durations this turn measured: those whose steps it saw, without
// the computation-only ones on a virtual clock (see Unmeasured).
func (t Turn) Latencies() map[string]time.Duration {
	out := t.spans()
	if t.VirtualClock {
		for name := range out {
			if Computation(name) {
				delete(out, name)
			}
		}
	}
	return out
}

// Unmeasured lists, in reporting order, the latencies whose steps this turn saw but its
// clock could not measure (computation on a virtual clock).
func (t Turn) Unmeasured() []string {
	if !t.VirtualClock {
		return nil
	}
	spans := t.spans()
	var out []string
	for _, name := range Names {
		if _, ok := spans[name]; ok && Computation(name) {
			out = append(out, name)
		}
	}
	return out
}

// MarshalJSON writes the turn as its latencies in milliseconds, and the names of those
// its clock could not measure.
func (t Turn) MarshalJSON() ([]byte, error) {
	type plain Turn
	ms := map[string]float64{}
	for k, v := range t.Latencies() {
		ms[k] = float64(v) / float64(time.Millisecond)
	}
	return json.Marshal(struct {
		plain
		LatencyMS  map[string]float64 `json:"latency_ms"`
		Unmeasured []string           `json:"unmeasured,omitempty"`
	}{plain(t), ms, t.Unmeasured()})
}

// String is one log line for the turn.
func (t Turn) String() string {
	lat := t.Latencies()
	var parts []string
	for _, n := range Names {
		if d, ok := lat[n]; ok {
			parts = append(parts, fmt.Sprintf("%s=%s", n, d.Round(time.Millisecond)))
		}
	}
	for _, n := range t.Unmeasured() {
		parts = append(parts, n+"=—")
	}
	return fmt.Sprintf("turn %d→%d: %s", t.UserTurn, t.AgentTurn, strings.Join(parts, " "))
}

// Stats summarises samples of one latency.
type Stats struct {
	N             int
	P50, P90, Max time.Duration
	Mean          time.Duration
	// Unmeasured says the latency's steps happened N times but no clock measured them
	// (computation on a virtual clock): the durations are not known, not zero.
	Unmeasured bool
}

// Summarize computes Stats per latency over turns. A latency that no turn measured but
// some saw happen gets Stats with Unmeasured set.
func Summarize(turns []Turn) map[string]Stats {
	samples := map[string][]time.Duration{}
	unmeasured := map[string]int{}
	for _, t := range turns {
		for k, v := range t.Latencies() {
			samples[k] = append(samples[k], v)
		}
		for _, k := range t.Unmeasured() {
			unmeasured[k]++
		}
	}
	out := map[string]Stats{}
	for k, v := range samples {
		out[k] = Of(v)
	}
	for k, n := range unmeasured {
		if _, ok := out[k]; !ok {
			out[k] = Stats{N: n, Unmeasured: true}
		}
	}
	return out
}

// Of computes Stats over durations (nearest-rank percentiles).
func Of(v []time.Duration) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Stats{N: len(s), P50: percentile(s, 50), P90: percentile(s, 90), Max: s[len(s)-1], Mean: sum / time.Duration(len(s))}
}

// percentile returns the nearest-rank percentile of sorted s.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

// WriteTable prints a summary table; unmeasured latencies show "—", with a note.
func WriteTable(w io.Writer, title string, summary map[string]Stats) {
	fmt.Fprintf(w, "%s\n", title)
	fmt.Fprintf(w, "  %-18s %5s %9s %9s %9s\n", "latency", "n", "p50", "p90", "max")
	unmeasured := false
	for _, n := range Names {
		s, ok := summary[n]
		if !ok {
			continue
		}
		if s.Unmeasured {
			unmeasured = true
			fmt.Fprintf(w, "  %-18s %5d %9s %9s %9s\n", n, s.N, "—", "—", "—")
			continue
		}
		fmt.Fprintf(w, "  %-18s %5d %9s %9s %9s\n", n, s.N, ms(s.P50), ms(s.P90), ms(s.Max))
	}
	if unmeasured {
		fmt.Fprintln(w, "  — : computation takes no time on a virtual clock (replay with --clock real to measure it)")
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// MarshalJSON writes the statistics in milliseconds, or, for an unmeasured latency,
// only its count and "unmeasured": true.
func (s Stats) MarshalJSON() ([]byte, error) {
	if s.Unmeasured {
		return json.Marshal(struct {
			N          int  `json:"n"`
			Unmeasured bool `json:"unmeasured"`
		}{s.N, true})
	}
	f := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return json.Marshal(struct {
		N      int     `json:"n"`
		P50MS  float64 `json:"p50_ms"`
		P90MS  float64 `json:"p90_ms"`
		MaxMS  float64 `json:"max_ms"`
		MeanMS float64 `json:"mean_ms"`
	}{s.N, f(s.P50), f(s.P90), f(s.Max), f(s.Mean)})
}

// CPU is what a session cost in CPU time: the process's total and each module's share,
// over Wall of real time (for a real-time replay, the audio's length).
type CPU struct {
	Wall    time.Duration            `json:"-"`
	Process time.Duration            `json:"-"`
	Modules map[string]time.Duration `json:"-"`
}

// ProcessCPU returns the CPU time (user and system) the process has used so far.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Add sums two sessions' costs.
func (c CPU) Add(o CPU) CPU {
	out := CPU{Wall: c.Wall + o.Wall, Process: c.Process + o.Process, Modules: map[string]time.Duration{}}
	for k, v := range c.Modules {
		out.Modules[k] += v
	}
	for k, v := range o.Modules {
		out.Modules[k] += v
	}
	return out
}

// PerSecond returns d as CPU seconds per second of session (1 = one core busy).
func (c CPU) PerSecond(d time.Duration) float64 {
	if c.Wall <= 0 {
		return 0
	}
	return d.Seconds() / c.Wall.Seconds()
}

// Unattributed is the CPU time no module's own threads used: the engines' worker threads
// (ggml's OpenMP pool), audio callbacks, the Go runtime's garbage collector.
func (c CPU) Unattributed() time.Duration {
	var sum time.Duration
	for _, v := range c.Modules {
		sum += v
	}
	return max(c.Process-sum, 0)
}

// MarshalJSON writes the cost as CPU seconds per second of session, in total, per module
// and unattributed, with the session's length in seconds.
func (c CPU) MarshalJSON() ([]byte, error) {
	mods := map[string]float64{}
	for k, v := range c.Modules {
		mods[k] = round3(c.PerSecond(v))
	}
	return json.Marshal(struct {
		WallSeconds  float64            `json:"wall_s"`
		Process      float64            `json:"process_cpu_per_s"`
		Modules      map[string]float64 `json:"module_cpu_per_s"`
		Unattributed float64            `json:"unattributed_cpu_per_s"`
	}{round3(c.Wall.Seconds()), round3(c.PerSecond(c.Process)), mods, round3(c.PerSecond(c.Unattributed()))})
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// WriteCPUTable writes the cost as a table: CPU seconds per second, the busiest first.
func WriteCPUTable(w io.Writer, title string, c CPU) {
	fmt.Fprintf(w, "%s: CPU per second of audio (1.0 = one core), %.1f s of audio\n", title, c.Wall.Seconds())
	names := make([]string, 0, len(c.Modules))
	for k := range c.Modules {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return c.Modules[names[i]] > c.Modules[names[j]] })
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, k := range names {
		fmt.Fprintf(tw, "  %s\t%.3f\n", k, c.PerSecond(c.Modules[k]))
	}
	fmt.Fprintf(tw, "  (engine worker threads, audio callbacks, GC)\t%.3f\n", c.PerSecond(c.Unattributed()))
	fmt.Fprintf(tw, "  process\t%.3f\n", c.PerSecond(c.Process))
	tw.Flush()
}
