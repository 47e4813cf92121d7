package eval

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The events a recording may be (source.Recording.Event).
const (
	EventTurnEnd      = "turn-end"
	EventPause        = "pause"
	EventBackchannel  = "backchannel"
	EventNoise        = "noise"
	EventInterruption = "interruption"
)

// selfInterruptionWindow is how long before the agent fell silent a sound of the user's
// must have been sounding for a cut not to be the agent's own doing.
const selfInterruptionWindow = 2 * time.Second

// stallResolution is the shortest silence between two chunks that counts as a stall: a
// chunk's length is known to the millisecond, so back-to-back chunks can seem a few
// milliseconds apart.
const stallResolution = 5 * time.Millisecond

// duckDB is the level at or below which the agent counts as ducked: half the duck.
const duckDB = -6.0

// Ms is a duration in milliseconds, for reports; nil when there is none.
type Ms *float64

func ms(d time.Duration) Ms {
	v := float64(d) / float64(time.Millisecond)
	return &v
}

// EventScore is what the agent did around one recording the scenario marked as an
// event. Which fields are set depends on the event (docs/EVAL.md).
type EventScore struct {
	Recording string `json:"recording"`
	Event     string `json:"event"`
	// Onset and End are where the recording's sound lay, seconds.
	Onset float64 `json:"onset"`
	End   float64 `json:"end"`
	// Scored is false when the event could not be scored (Note says why): a recording
	// that never played, or a sound that should have been over the agent and was not.
	Scored bool   `json:"scored"`
	Note   string `json:"note,omitempty"`
	// AgentTurn is the agent's turn it is about: the reply (turn-end), the turn it was
	// over (backchannel, noise, interruption).
	AgentTurn int `json:"agent_turn,omitempty"`
	// Takeover: the agent took the turn (Full-Duplex-Bench's TOR counts these).
	Takeover bool `json:"takeover"`
	// WordsInPause: some audible word of the agent's began in the pause (pause).
	WordsInPause bool `json:"words_in_pause,omitempty"`
	// GapMs: from the end of the user's turn to the reply's first audible word
	// (turn-end, takeovers only).
	GapMs Ms `json:"gap_ms,omitempty"`
	// SilenceMs: the longest the agent's turn stood silent after the sound's onset
	// (backchannel, noise).
	SilenceMs Ms `json:"silence_ms,omitempty"`
	// DuckMs and SilentMs: from the interruption's onset until the agent was ducked
	// (or silent) and until it fell silent; Missed: the agent's turn was not cut;
	// ResponseGapMs: from the interruption's end to the reply's first audible word.
	DuckMs        Ms   `json:"duck_ms,omitempty"`
	SilentMs      Ms   `json:"silent_ms,omitempty"`
	Missed        bool `json:"missed,omitempty"`
	ResponseGapMs Ms   `json:"response_gap_ms,omitempty"`
}

// ScenarioScore is one replay's scores.
type ScenarioScore struct {
	Scenario string       `json:"scenario"`
	Events   []EventScore `json:"events"`
	// SelfInterruptions are the agent turns cut with no sound of the user's in the
	// two seconds before the agent fell silent (their turn ids).
	SelfInterruptions []int `json:"self_interruptions,omitempty"`
	// HistoryExact: every stored agent turn holds exactly the words heard of it, and
	// every turn heard is stored; HistoryDiffs says where not.
	HistoryExact bool     `json:"history_exact"`
	HistoryDiffs []string `json:"history_diffs,omitempty"`
	// Turns are the agent turns heard: id, when, what, cut.
	Turns []TurnHeard `json:"turns"`
	// Unexplained is sound in agent.wav that no chunk reported played accounts for,
	// SilentWords words reported heard that agent.wav holds no sound for: both should
	// be zero; otherwise the scores above are in doubt.
	UnexplainedMs float64 `json:"unexplained_ms"`
	SilentWords   int     `json:"silent_words"`
	// Error is why the replay or its scoring failed (then nothing above is set).
	Error string `json:"error,omitempty"`
}

// TurnHeard describes an agent turn heard, for tracing a score.
type TurnHeard struct {
	ID          int     `json:"id"`
	FirstHeard  float64 `json:"first_heard"`
	LastHeard   float64 `json:"last_heard"`
	Cut         bool    `json:"cut"`
	AudibleText string  `json:"audible_text"`
}

// Score scores one replay's outputs.
func Score(name string, o *Outputs) ScenarioScore {
	l := hear(o)
	s := ScenarioScore{Scenario: name, UnexplainedMs: float64(l.Unexplained) / float64(time.Millisecond), SilentWords: l.SilentWords}
	for _, t := range l.Turns {
		var text []string
		for _, w := range t.AudibleWords() {
			text = append(text, w.Text)
		}
		s.Turns = append(s.Turns, TurnHeard{ID: t.ID, FirstHeard: t.FirstHeard.Seconds(), LastHeard: t.LastHeard.Seconds(), Cut: t.Cut, AudibleText: strings.Join(text, " ")})
	}
	sc := scorer{o: o, l: l}
	for i, r := range o.Recordings {
		if r.Event == "" {
			continue
		}
		e := EventScore{Recording: r.Name, Event: r.Event, Onset: r.SpeechStart().Seconds(), End: r.SpeechEnd().Seconds()}
		if !r.Played {
			e.Note = "the recording never played"
		} else {
			sc.score(i, &e)
		}
		s.Events = append(s.Events, e)
	}
	s.SelfInterruptions = sc.selfInterruptions()
	s.HistoryDiffs = sc.historyDiffs()
	s.HistoryExact = len(s.HistoryDiffs) == 0
	return s
}

type scorer struct {
	o *Outputs
	l *Listening
}

func (sc scorer) score(i int, e *EventScore) {
	r := sc.o.Recordings[i]
	onset, end := r.SpeechStart(), r.SpeechEnd()
	switch r.Event {
	case EventTurnEnd:
		// The reply: the first turn that takes the turn among those whose first audible
		// word lies between the onset of the user's last speech and their next speech
		// that the scenario did not place after the agent's (a reply the user's last
		// words cut after a word or two is not the reply to them).
		until := sc.nextSpeech(i, onset, true)
		e.Scored = true
		for _, t := range sc.l.Turns {
			first, ok := t.FirstAudible()
			if !ok || first < onset || first >= until || !t.Takeover() {
				continue
			}
			e.AgentTurn, e.Takeover, e.GapMs = t.ID, true, ms(first-end)
			break
		}
	case EventPause:
		// The pause runs from the end of this speech to the next pause of the turn, or
		// the turn's end: a reply to it may start after the user went on.
		until := sc.pauseEnd(i)
		e.Scored = true
		for _, t := range sc.l.Turns {
			if first, ok := t.FirstAudible(); ok && first >= end && first < until {
				e.Takeover = e.Takeover || t.Takeover()
				if e.AgentTurn == 0 {
					e.AgentTurn = t.ID
				}
			}
			for _, w := range t.AudibleWords() {
				if w.Onset >= end && w.Onset < until {
					e.WordsInPause = true
				}
			}
		}
	case EventBackchannel, EventNoise:
		// The sound takes the turn over when the agent's turn under way stops before the
		// user's next speech, or the agent replies to it with a turn of its own.
		t := sc.turnAt(onset)
		if t == nil {
			e.Note = "the agent was not speaking at the sound's onset"
			return
		}
		next := sc.nextSpeech(i, onset, false)
		e.Scored, e.AgentTurn = true, t.ID
		e.Takeover = t.Cut && t.LastHeard >= onset && t.LastHeard < next
		e.SilenceMs = ms(sc.longestStall(t, onset))
		if u := sc.firstTurnFrom(onset, next, t.ID); u != nil && u.Takeover() {
			e.Takeover = true
		}
	case EventInterruption:
		t := sc.turnAt(onset)
		if t == nil {
			e.Note = "the agent was not speaking at the interruption's onset"
			return
		}
		e.Scored, e.AgentTurn = true, t.ID
		cut := t.Cut && t.LastHeard >= onset
		e.Missed = !cut
		e.SilentMs = ms(t.LastHeard - onset)
		if d, ok := sc.duckedAt(t, onset); ok {
			e.DuckMs = ms(d - onset)
		}
		next := sc.nextSpeech(i, end, false)
		if u := sc.firstTurnFrom(onset, next, t.ID); u != nil {
			e.Takeover = cut && u.Takeover()
			if first, _ := u.FirstAudible(); e.Takeover {
				e.ResponseGapMs = ms(first - end)
			}
		}
	default:
		e.Note = fmt.Sprintf("unknown event %q", r.Event)
	}
}

// nextSpeech is the onset of the first speech of the user's after from (recordings
// other than the i-th and background ones), or the end of the output; with uncued, the
// speech placed after the agent's is passed over.
func (sc scorer) nextSpeech(i int, from time.Duration, uncued bool) time.Duration {
	next := max(sc.o.Length(), from) + time.Hour
	for j, r := range sc.o.Recordings {
		if j == i || !r.Played || r.Background() || uncued && r.Cued() {
			continue
		}
		if s := r.SpeechStart(); s > from && s < next {
			next = s
		}
	}
	return next
}

// pauseEnd is where the stretch that a reply to the i-th recording's pause would start
// in ends: at the next pause of the user's turn, or at the turn's end (the end of the
// first recording after it that ends a turn, else the last of the user's speech).
func (sc scorer) pauseEnd(i int) time.Duration {
	var last time.Duration
	for j := i + 1; j < len(sc.o.Recordings); j++ {
		r := sc.o.Recordings[j]
		if !r.Played || r.Background() {
			continue
		}
		last = max(last, r.SpeechEnd())
		if r.Event == EventTurnEnd || r.Event == EventPause {
			return r.SpeechEnd()
		}
	}
	return max(last, sc.o.Recordings[i].SpeechEnd())
}

// firstTurnFrom returns the first turn other than except whose first audible word lies
// in [from, until).
func (sc scorer) firstTurnFrom(from, until time.Duration, except int) *Turn {
	var best *Turn
	var bestAt time.Duration
	for _, t := range sc.l.Turns {
		first, ok := t.FirstAudible()
		if !ok || t.ID == except || first < from || first >= until {
			continue
		}
		if best == nil || first < bestAt {
			best, bestAt = t, first
		}
	}
	return best
}

// turnAt returns the turn whose audio was being heard at t (pauses within it included).
func (sc scorer) turnAt(t time.Duration) *Turn {
	for _, u := range sc.l.Turns {
		if len(u.AudibleWords()) > 0 && u.FirstHeard <= t && t < u.LastHeard {
			return u
		}
	}
	return nil
}

// longestStall is the longest the turn t stood silent after from while it had more to
// say: a gap between two of its chunks (a pause, or a stop the turn came back from),
// or, when it was cut after from, the time from the cut until the agent was next
// audible (or the output ended).
func (sc scorer) longestStall(t *Turn, from time.Duration) time.Duration {
	var worst time.Duration
	for k := 1; k < len(t.Chunks); k++ {
		gapStart, gapEnd := max(t.Chunks[k-1].End, from), t.Chunks[k].Start
		if gap := gapEnd - gapStart; gap >= stallResolution {
			worst = max(worst, gap)
		}
	}
	if t.Cut && t.LastHeard >= from {
		next := sc.o.Length()
		for _, u := range sc.l.Turns {
			if first, ok := u.FirstAudible(); ok && u.ID != t.ID && first >= t.LastHeard && first < next {
				next = first
			}
		}
		worst = max(worst, next-t.LastHeard)
	}
	return worst
}

// duckedAt returns the first time from from on that the listener heard the agent at
// duckDB or below, paused, or no longer (its turn cut).
func (sc scorer) duckedAt(t *Turn, from time.Duration) (time.Duration, bool) {
	for _, r := range sc.o.Progress {
		if r.Pos < from {
			continue
		}
		if r.Gain <= duckDB || r.State == "paused" || r.State == "stopped" {
			return r.Pos, true
		}
		if r.Pos > t.LastHeard {
			break
		}
	}
	if t.Cut && t.LastHeard >= from {
		return t.LastHeard, true
	}
	return 0, false
}

// selfInterruptions lists the turns cut with no sound of the user's (but background
// ones) sounding in the two seconds before the agent fell silent.
func (sc scorer) selfInterruptions() []int {
	var out []int
	for _, t := range sc.l.Turns {
		if !t.Cut {
			continue
		}
		caused := false
		for _, r := range sc.o.Recordings {
			if r.Played && !r.Background() && r.SpeechStart() <= t.LastHeard && r.SpeechEnd() >= t.LastHeard-selfInterruptionWindow {
				caused = true
			}
		}
		if !caused {
			out = append(out, t.ID)
		}
	}
	return out
}

// historyDiffs compares every stored agent turn with the words heard of it (each heard
// at least the configured share), and finds turns heard but not stored.
func (sc scorer) historyDiffs() []string {
	minFraction := sc.o.MinWordFraction
	if minFraction <= 0 {
		minFraction = 0.5
	}
	var diffs []string
	stored := map[int]bool{}
	for _, u := range sc.o.History {
		if u.Speaker != "agent" {
			continue
		}
		stored[u.TurnID] = true
		var heard []string
		if t := sc.l.Turn(u.TurnID); t != nil {
			for _, w := range t.HeardWords(minFraction) {
				heard = append(heard, words(w.Text)...)
			}
		}
		if got := words(u.Text); !slices.Equal(got, heard) {
			diffs = append(diffs, fmt.Sprintf("turn %d: stored %q, heard %q", u.TurnID, strings.Join(got, " "), strings.Join(heard, " ")))
		}
	}
	for _, t := range sc.l.Turns {
		if !stored[t.ID] && len(t.HeardWords(minFraction)) > 0 {
			var heard []string
			for _, w := range t.HeardWords(minFraction) {
				heard = append(heard, w.Text)
			}
			diffs = append(diffs, fmt.Sprintf("turn %d: heard %q, not stored", t.ID, strings.Join(heard, " ")))
		}
	}
	return diffs
}
