package eval

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Rate is K of N events.
type Rate struct {
	N int `json:"n"`
	K int `json:"k"`
}

// Value is K/N, NaN without events.
func (r Rate) Value() float64 {
	if r.N == 0 {
		return math.NaN()
	}
	return float64(r.K) / float64(r.N)
}

func (r *Rate) add(yes bool) {
	r.N++
	if yes {
		r.K++
	}
}

func (r Rate) String() string {
	if r.N == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f (%d/%d)", r.Value(), r.K, r.N)
}

// Stats are nearest-rank percentiles of durations in milliseconds. Never counts the
// events where what was timed never happened; they sort above every time, so a p50
// that falls on one is never (nil).
type Stats struct {
	N     int      `json:"n"`
	Never int      `json:"never,omitempty"`
	P50   *float64 `json:"p50_ms"`
	P90   *float64 `json:"p90_ms"`
	Max   *float64 `json:"max_ms"`
}

func statsOf(v []float64, never int) Stats {
	s := Stats{N: len(v) + never, Never: never}
	sorted := append([]float64(nil), v...)
	sort.Float64s(sorted)
	at := func(p float64) *float64 {
		if s.N == 0 {
			return nil
		}
		i := int(math.Ceil(p/100*float64(s.N))) - 1
		if i >= len(sorted) {
			return nil // a never
		}
		x := sorted[max(i, 0)]
		return &x
	}
	s.P50, s.P90, s.Max = at(50), at(90), at(100)
	return s
}

func (s Stats) show(p *float64) string {
	switch {
	case s.N == 0:
		return "—"
	case p == nil:
		return "never"
	}
	return fmt.Sprintf("%.0f", *p)
}

// Summary is one pipeline's scores over the scenario set.
type Summary struct {
	Scenarios int `json:"scenarios"`
	// Failed counts the replays that failed (their scenarios are not scored).
	Failed int `json:"failed"`
	// Full-Duplex-Bench's: takeover rates and the gap of smooth turn-taking.
	PauseTOR        Rate  `json:"pause_tor"`
	BackchannelTOR  Rate  `json:"backchannel_tor"`
	SmoothTOR       Rate  `json:"smooth_tor"`
	Gap             Stats `json:"gap"`
	InterruptionTOR Rate  `json:"interruption_tor"`
	// The interruption's timing: ducked, silent, the reply after its end.
	Duck        Stats `json:"duck"`
	Silent      Stats `json:"silent"`
	ResponseGap Stats `json:"response_gap"`
	// Parley's own.
	PauseWords       Rate     `json:"pause_words"`
	NoiseTOR         Rate     `json:"noise_tor"`
	Missed           int      `json:"interruptions_missed"`
	LongestSilenceMs *float64 `json:"longest_silence_ms"`
	// SilencesOverLimit counts backchannels and noises that silenced the agent longer
	// than SilenceLimit.
	SilencesOverLimit int  `json:"silences_over_100ms"`
	SelfInterruptions int  `json:"self_interruptions"`
	HistoryExact      Rate `json:"history_exact"`
	// NotOverAgent counts backchannels, noises and interruptions the agent was not
	// speaking at (not scored).
	NotOverAgent  int     `json:"not_over_agent"`
	UnexplainedMs float64 `json:"unexplained_ms"`
	SilentWords   int     `json:"silent_words"`
	// Against names what counts against each score a scenario can fail, to trace a
	// target not met to its replays.
	Against Against `json:"against"`
}

// Against lists, per score, the scenarios and events that count against it, as
// "SCENARIO: what" ("list-04: \"we saw a fox,\"").
type Against struct {
	Pause             []string `json:"pause,omitempty"`              // the agent took the turn in the pause
	Backchannel       []string `json:"backchannel,omitempty"`        // the agent took the turn at a backchannel
	Silence           []string `json:"silence,omitempty"`            // a backchannel or noise silenced it over SilenceLimit
	Smooth            []string `json:"smooth,omitempty"`             // no reply to the turn's end
	Interruption      []string `json:"interruption,omitempty"`       // not cut and replied to
	Missed            []string `json:"missed,omitempty"`             // not cut at all
	SelfInterruptions []string `json:"self_interruptions,omitempty"` // cut with no sound of the user's
	History           []string `json:"history,omitempty"`            // history not exact, or the replay failed
}

// against names event e of scenario sc.
func against(sc ScenarioScore, e EventScore, detail string) string {
	s := fmt.Sprintf("%s: %q", sc.Scenario, e.Recording)
	if detail != "" {
		s += " (" + detail + ")"
	}
	return s
}

// SilenceLimit is the longest a backchannel or a noise may silence the agent (a target).
const SilenceLimit = 100 * time.Millisecond

// Summarize sums up a pipeline's scenario scores.
func Summarize(scores []ScenarioScore) Summary {
	var s Summary
	var gaps, ducks, silents, replies []float64
	duckNever := 0
	for _, sc := range scores {
		s.Scenarios++
		if sc.Error != "" {
			s.Failed++
			failed := sc.Scenario + ": the replay failed"
			s.Against.History = append(s.Against.History, failed)
			s.Against.SelfInterruptions = append(s.Against.SelfInterruptions, failed)
			continue
		}
		s.HistoryExact.add(sc.HistoryExact)
		if !sc.HistoryExact {
			s.Against.History = append(s.Against.History, sc.Scenario+": "+strings.Join(sc.HistoryDiffs, "; "))
		}
		s.SelfInterruptions += len(sc.SelfInterruptions)
		if len(sc.SelfInterruptions) > 0 {
			s.Against.SelfInterruptions = append(s.Against.SelfInterruptions, fmt.Sprintf("%s: agent turns %v", sc.Scenario, sc.SelfInterruptions))
		}
		s.UnexplainedMs += sc.UnexplainedMs
		s.SilentWords += sc.SilentWords
		for _, e := range sc.Events {
			if !e.Scored {
				if e.Event != EventTurnEnd && e.Event != EventPause {
					s.NotOverAgent++
				}
				continue
			}
			switch e.Event {
			case EventTurnEnd:
				s.SmoothTOR.add(e.Takeover)
				if e.GapMs != nil {
					gaps = append(gaps, *e.GapMs)
				}
				if !e.Takeover {
					s.Against.Smooth = append(s.Against.Smooth, against(sc, e, ""))
				}
			case EventPause:
				s.PauseTOR.add(e.Takeover)
				s.PauseWords.add(e.WordsInPause)
				if e.Takeover {
					s.Against.Pause = append(s.Against.Pause, against(sc, e, ""))
				}
			case EventBackchannel, EventNoise:
				if e.Event == EventBackchannel {
					s.BackchannelTOR.add(e.Takeover)
					if e.Takeover {
						s.Against.Backchannel = append(s.Against.Backchannel, against(sc, e, ""))
					}
				} else {
					s.NoiseTOR.add(e.Takeover)
				}
				if e.SilenceMs != nil {
					if s.LongestSilenceMs == nil || *e.SilenceMs > *s.LongestSilenceMs {
						v := *e.SilenceMs
						s.LongestSilenceMs = &v
					}
					if *e.SilenceMs > float64(SilenceLimit/time.Millisecond) {
						s.SilencesOverLimit++
						s.Against.Silence = append(s.Against.Silence, against(sc, e, fmt.Sprintf("%s, %.0f ms", e.Event, *e.SilenceMs)))
					}
				}
			case EventInterruption:
				s.InterruptionTOR.add(e.Takeover)
				switch {
				case e.Missed:
					s.Missed++
					s.Against.Missed = append(s.Against.Missed, against(sc, e, ""))
					s.Against.Interruption = append(s.Against.Interruption, against(sc, e, "missed"))
				case !e.Takeover:
					s.Against.Interruption = append(s.Against.Interruption, against(sc, e, "no reply"))
				}
				if e.DuckMs != nil {
					ducks = append(ducks, *e.DuckMs)
				} else {
					duckNever++
				}
				if e.SilentMs != nil {
					silents = append(silents, *e.SilentMs)
				}
				if e.ResponseGapMs != nil {
					replies = append(replies, *e.ResponseGapMs)
				}
			}
		}
	}
	s.Gap, s.Duck, s.Silent, s.ResponseGap = statsOf(gaps, 0), statsOf(ducks, duckNever), statsOf(silents, 0), statsOf(replies, 0)
	return s
}

// Target is one of the targets the predictive pipeline is to meet, judged.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
	// Against is what counts against it (Summary.Against), for the targets a
	// scenario can fail on its own.
	Against []string `json:"against,omitempty"`
}

// Targets judges s (the predictive pipeline's summary, with the demo's models) against
// the targets of turn-taking; laptop is the simulated laptop's set, which allows an
// interruption more time to silence the agent and misses none.
func Targets(s Summary, laptop bool) []Target {
	le := func(p *float64, limit float64) bool { return p != nil && *p <= limit }
	rateIs := func(r Rate, ok func(float64) bool) bool { return r.N > 0 && ok(r.Value()) }
	silentLimit := 300.0
	if laptop {
		silentLimit = 500
	}
	a := s.Against
	t := []Target{
		{Name: "pause handling TOR", Want: "≤ 0.05", Got: s.PauseTOR.String(), Met: rateIs(s.PauseTOR, func(v float64) bool { return v <= 0.05 }), Against: a.Pause},
		{Name: "backchannel TOR", Want: "0", Got: s.BackchannelTOR.String(), Met: rateIs(s.BackchannelTOR, func(v float64) bool { return v == 0 }), Against: a.Backchannel},
		{Name: "longest silence by a backchannel or noise", Want: "≤ 100 ms", Got: showMs(s.LongestSilenceMs), Met: s.LongestSilenceMs != nil && *s.LongestSilenceMs <= 100, Against: a.Silence},
		{Name: "smooth turn-taking TOR", Want: "1", Got: s.SmoothTOR.String(), Met: rateIs(s.SmoothTOR, func(v float64) bool { return v == 1 }), Against: a.Smooth},
		{Name: "gap p50", Want: "≤ 350 ms", Got: s.Gap.show(s.Gap.P50), Met: le(s.Gap.P50, 350)},
		{Name: "interruption TOR", Want: "1", Got: s.InterruptionTOR.String(), Met: rateIs(s.InterruptionTOR, func(v float64) bool { return v == 1 }), Against: a.Interruption},
		{Name: "ducked after an interruption's onset, p50", Want: "≤ 150 ms", Got: s.Duck.show(s.Duck.P50), Met: le(s.Duck.P50, 150)},
		{Name: "silent after an interruption's onset, p50", Want: fmt.Sprintf("≤ %.0f ms", silentLimit), Got: s.Silent.show(s.Silent.P50), Met: le(s.Silent.P50, silentLimit)},
		{Name: "self-interruptions", Want: "0", Got: fmt.Sprint(s.SelfInterruptions), Met: s.Failed == 0 && s.SelfInterruptions == 0, Against: a.SelfInterruptions},
		{Name: "history exact", Want: "every scenario", Got: s.HistoryExact.String(), Met: s.Failed == 0 && s.HistoryExact.N > 0 && s.HistoryExact.K == s.HistoryExact.N, Against: a.History},
	}
	if laptop {
		t = append(t, Target{Name: "interruptions missed", Want: "0", Got: fmt.Sprint(s.Missed), Met: s.InterruptionTOR.N > 0 && s.Missed == 0, Against: a.Missed})
	}
	return t
}

func showMs(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f ms", *p)
}

// TargetPipeline is the pipeline the targets are for.
const TargetPipeline = "predictive"

// WriteTable prints the pipelines' summaries side by side, one score a row, and the
// targets with which the target pipeline meets.
func WriteTable(w io.Writer, pipelines []string, sums map[string]Summary, laptop bool) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprint(tw, "score")
	for _, p := range pipelines {
		fmt.Fprintf(tw, "\t%s", p)
	}
	fmt.Fprintln(tw)
	row := func(name string, f func(Summary) string) {
		fmt.Fprint(tw, name)
		for _, p := range pipelines {
			fmt.Fprintf(tw, "\t%s", f(sums[p]))
		}
		fmt.Fprintln(tw)
	}
	p50p90 := func(st Stats) string {
		if st.N == 0 {
			return "—"
		}
		return fmt.Sprintf("%s / %s (n %d)", st.show(st.P50), st.show(st.P90), st.N)
	}
	section := func(name string) { fmt.Fprintln(tw, name+strings.Repeat("\t", len(pipelines))) }
	section("Full-Duplex-Bench's")
	row("  pause handling TOR ↓", func(s Summary) string { return s.PauseTOR.String() })
	row("  backchannel TOR ↓", func(s Summary) string { return s.BackchannelTOR.String() })
	row("  smooth turn-taking TOR ↑", func(s Summary) string { return s.SmoothTOR.String() })
	row("  gap to the first word, ms p50 / p90", func(s Summary) string { return p50p90(s.Gap) })
	row("  interruption TOR ↑", func(s Summary) string { return s.InterruptionTOR.String() })
	row("  interruption: ducked, ms p50 / p90", func(s Summary) string { return p50p90(s.Duck) })
	row("  interruption: silent, ms p50 / p90", func(s Summary) string { return p50p90(s.Silent) })
	row("  interruption: reply after its end, ms p50 / p90", func(s Summary) string { return p50p90(s.ResponseGap) })
	section("Parley's")
	row("  noise TOR ↓", func(s Summary) string { return s.NoiseTOR.String() })
	row("  pauses the agent spoke into ↓", func(s Summary) string { return s.PauseWords.String() })
	row("  longest silence by a backchannel or noise", func(s Summary) string {
		return fmt.Sprintf("%s (%d over %v)", showMs(s.LongestSilenceMs), s.SilencesOverLimit, SilenceLimit)
	})
	row("  interruptions missed", func(s Summary) string { return fmt.Sprint(s.Missed) })
	row("  self-interruptions", func(s Summary) string { return fmt.Sprint(s.SelfInterruptions) })
	row("  history exact (scenarios)", func(s Summary) string { return s.HistoryExact.String() })
	row("  sounds not over the agent (not scored)", func(s Summary) string { return fmt.Sprint(s.NotOverAgent) })
	row("  replays failed", func(s Summary) string { return fmt.Sprintf("%d of %d", s.Failed, s.Scenarios) })
	row("  scoring doubts: unexplained audio ms, silent words", func(s Summary) string {
		return fmt.Sprintf("%.0f, %d", s.UnexplainedMs, s.SilentWords)
	})
	tw.Flush()

	sum, ok := sums[TargetPipeline]
	if !ok {
		return
	}
	set := "the demo's"
	if laptop {
		set = "the simulated laptop's"
	}
	fmt.Fprintf(w, "\ntargets (%s pipeline, %s):\n", TargetPipeline, set)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	met := 0
	targets := Targets(sum, laptop)
	for _, t := range targets {
		mark := "NOT met"
		if t.Met {
			mark, met = "met", met+1
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.Name, t.Want, t.Got, mark)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d targets met\n", met, len(targets))
	writeAgainst(w, targets)
}

// shownAgainst is how many of a target's counter-examples the table names; eval.json
// has them all.
const shownAgainst = 8

// writeAgainst names, under each target not met, the scenarios that count against it.
func writeAgainst(w io.Writer, targets []Target) {
	header := false
	for _, t := range targets {
		if t.Met || len(t.Against) == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nwhat counts against the targets not met:")
			header = true
		}
		fmt.Fprintf(w, "  %s:\n", t.Name)
		for _, a := range t.Against[:min(len(t.Against), shownAgainst)] {
			fmt.Fprintf(w, "    %s\n", a)
		}
		if n := len(t.Against) - shownAgainst; n > 0 {
			fmt.Fprintf(w, "    … and %d more (eval.json)\n", n)
		}
	}
}

// Report is what an evaluation wrote to eval.json.
type Report struct {
	Date      time.Time                  `json:"date"`
	Set       []string                   `json:"set"`
	Config    string                     `json:"config"`
	Laptop    bool                       `json:"laptop"`
	Pipelines []string                   `json:"pipelines"`
	WallSecs  float64                    `json:"wall_s"`
	Summaries map[string]Summary         `json:"summaries"`
	Targets   []Target                   `json:"targets,omitempty"`
	Scenarios map[string][]ScenarioScore `json:"scenarios"`
	// Replays is the folder holding each replay (pipeline/scenario).
	Replays string `json:"replays"`
}
