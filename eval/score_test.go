package eval

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/tts"
)

// TestParseSummaries reads back what tts.Chunk and speaker.Progress write into the
// timeline: if their summaries change, the scoring must follow.
func TestParseSummaries(t *testing.T) {
	chunks := []tts.Chunk{
		{Audio: audio.Frame{Rate: 22050, Channels: 1, Samples: make([]float32, 441), Start: 441 * 3}, TurnID: 2, ClauseID: 1, Seq: 3, WordIndex: 4,
			ClauseText: `she said "can't" twice`, CharStart: 9, CharEnd: 16, FirstOfClause: true},
		{Audio: audio.Frame{Rate: 22050, Channels: 1, Samples: make([]float32, 22)}, TurnID: 12, WordIndex: -1, LastOfClause: true, LastOfTurn: true},
	}
	for _, c := range chunks {
		got, err := ParseChunk(c.Summary())
		if err != nil {
			t.Fatal(err)
		}
		want := Chunk{Turn: c.TurnID, Clause: c.ClauseID, Seq: c.Seq, Word: c.WordIndex, Text: c.Word(),
			Start: c.Audio.StartTime().Round(time.Millisecond), Dur: c.Audio.Duration().Round(time.Millisecond)}
		if got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.Summary(), got, want)
		}
	}
	item := tts.Chunk{TurnID: 2}
	for _, p := range []speaker.Progress{
		{State: speaker.Playing, Heard: "tts/131", Item: item, Offset: 220, Length: 441, Pos: 2560 * time.Millisecond},
		{State: speaker.Stopped, Heard: "tts/252", Item: item, Offset: 86, Length: 441, Pos: 4870 * time.Millisecond, Tail: true, Gain: -12, Reason: "interrupt turn 2: barge-in (words: \"stop\")"},
		{State: speaker.Idle, Pos: time.Second},
		{State: speaker.Paused, Heard: "tts/9", Offset: 1, Length: 2, Pos: 3 * time.Second, Gain: -3.5, Reason: "pause turn 4"},
	} {
		got, err := ParseProgress(p.Summary())
		if err != nil {
			t.Fatal(err)
		}
		want := Progress{State: p.State.String(), Pos: p.Pos, Heard: p.Heard, Offset: p.Offset, Length: p.Length, Tail: p.Tail, Gain: p.Gain, Reason: p.Reason}
		if got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", p.Summary(), got, want)
		}
	}
	for _, bad := range []string{"", "turn x", "playing", "turn 1 clause 0 #0 @0.000s +20ms word 0 Anna"} {
		if _, err := ParseChunk(bad); err == nil {
			t.Errorf("chunk %q parsed", bad)
		}
		if _, err := ParseProgress(bad); err == nil && bad != "playing" {
			t.Errorf("progress %q parsed", bad)
		}
	}
}

// script builds the outputs of a made-up replay: the agent's turns as chunks the
// speaker plays, its reports every 20 ms, agent.wav's levels, the recordings and the
// history.
type script struct {
	o      Outputs
	n      int
	played []played
	gains  []gainAt
	stops  map[int]time.Duration // turn → when the speaker stopped it
	pauses []span
	length time.Duration
}

type played struct {
	c     Chunk
	start time.Duration
}

type gainAt struct {
	at time.Duration
	db float64
}

type span struct{ from, to time.Duration }

const chunkDur = 20 * time.Millisecond

func newScript() *script { return &script{stops: map[int]time.Duration{}} }

// say has the agent speak words in turn from at, each word dur long, a comma's 200 ms
// pause after words ending in ","; it returns when the turn would end.
func (s *script) say(turn int, at time.Duration, text string, dur time.Duration) time.Duration {
	t := at
	for i, w := range strings.Fields(text) {
		for k := time.Duration(0); k < dur; k += chunkDur {
			s.chunk(Chunk{Turn: turn, Word: i, Text: strings.TrimRight(w, ","), Dur: chunkDur}, t)
			t += chunkDur
		}
		if strings.HasSuffix(w, ",") {
			for k := 0; k < 10; k++ {
				s.chunk(Chunk{Turn: turn, Word: -1, Dur: chunkDur}, t)
				t += chunkDur
			}
		}
	}
	s.length = max(s.length, t+time.Second)
	return t
}

func (s *script) chunk(c Chunk, at time.Duration) {
	s.n++
	c.ID, c.Seq, c.Committed = iu.ID(fmt.Sprintf("tts/%d", s.n)), s.n, true
	s.o.Chunks = append(s.o.Chunks, c)
	s.played = append(s.played, played{c: c, start: at})
}

// user places a recording whose sound lies from..to.
func (s *script) user(name, event string, from, to time.Duration) {
	s.o.Recordings = append(s.o.Recordings, Recording{Index: len(s.o.Recordings), Name: name, Role: "user", Event: event, Played: true, How: "at",
		SpeechStartS: from.Seconds(), SpeechEndS: to.Seconds()})
	s.length = max(s.length, to+time.Second)
}

// build shifts the chunks heard after a pause, cuts the stopped turns and writes the
// reports and levels.
func (s *script) build() *Outputs {
	var kept []played
	for _, p := range s.played {
		for _, ps := range s.pauses {
			if p.start >= ps.from {
				p.start += ps.to - ps.from
			}
		}
		if stop, ok := s.stops[p.c.Turn]; ok && p.start >= stop {
			continue // dropped unheard
		}
		kept = append(kept, p)
	}
	s.o.Levels = make([]float64, int(s.length/Window))
	for i := range s.o.Levels {
		s.o.Levels[i] = -120
	}
	for _, p := range kept {
		end := p.start + p.c.Dur
		if stop, ok := s.stops[p.c.Turn]; ok {
			end = min(end, stop)
		}
		for w := p.start / Window; w < end/Window && int(w) < len(s.o.Levels); w++ {
			if p.c.Word >= 0 {
				s.o.Levels[w] = -20
			}
		}
	}
	gain := func(t time.Duration) float64 {
		g := 0.0
		for _, ga := range s.gains {
			if ga.at <= t {
				g = ga.db
			}
		}
		return g
	}
	// Reports every 20 ms, halfway through the chunks, and at each pause and stop.
	type at struct {
		t     time.Duration
		state string
	}
	var times []at
	for t := chunkDur / 2; t < s.length; t += chunkDur {
		times = append(times, at{t, "playing"})
	}
	for _, ps := range s.pauses {
		times = append(times, at{ps.from, "paused"})
	}
	for _, stop := range s.stops {
		times = append(times, at{stop, "stopped"})
	}
	// The speaker says when it played everything of a turn.
	lastOf := map[int]played{}
	for _, p := range kept {
		lastOf[p.c.Turn] = p
	}
	for turn, p := range lastOf {
		if _, stopped := s.stops[turn]; !stopped {
			times = append(times, at{p.start + p.c.Dur, "idle"})
		}
	}
	slices.SortStableFunc(times, func(a, b at) int { return int(a.t - b.t) })
	for _, a := range times {
		paused := false
		for _, ps := range s.pauses {
			paused = paused || a.state == "playing" && a.t >= ps.from && a.t < ps.to
		}
		if paused {
			continue
		}
		r := s.report(a.state, a.t, kept, gain(a.t))
		r.Tail = a.state == "stopped"
		if a.state == "idle" {
			r.Pos += 5 * time.Millisecond // noticed at the speaker's next step
		}
		if r.Heard != "" {
			s.o.Progress = append(s.o.Progress, r)
		}
	}
	return &s.o
}

// report says what was heard at t: the chunk sounding (or, stopped or paused, the last
// one heard).
func (s *script) report(state string, t time.Duration, kept []played, gain float64) Progress {
	for i := len(kept) - 1; i >= 0; i-- {
		p := kept[i]
		if p.start <= t && (t < p.start+p.c.Dur || state != "playing" && t <= p.start+p.c.Dur) {
			off := int(math.Round(float64(t-p.start) / float64(p.c.Dur) * 441))
			if state == "playing" && off == 0 {
				continue
			}
			return Progress{State: state, Pos: t, Heard: p.c.ID, Offset: off, Length: 441, Gain: gain}
		}
	}
	return Progress{State: state, Pos: t, Gain: gain}
}

func (s *script) store(turn int, speakerName, text string) {
	s.o.History = append(s.o.History, Utterance{Speaker: speakerName, Text: text, TurnID: turn})
}

func event(t *testing.T, sc ScenarioScore, name string) EventScore {
	t.Helper()
	for _, e := range sc.Events {
		if e.Recording == name {
			return e
		}
	}
	t.Fatalf("no event %q in %+v", name, sc.Events)
	return EventScore{}
}

func near(p Ms, want time.Duration, slack time.Duration) bool {
	return p != nil && math.Abs(*p-float64(want)/float64(time.Millisecond)) <= float64(slack)/float64(time.Millisecond)
}

func TestScoreSmoothTurn(t *testing.T) {
	s := newScript()
	s.user("question", EventTurnEnd, 500*time.Millisecond, 1500*time.Millisecond)
	s.say(2, 1800*time.Millisecond, "Anna, you can go to the park", 200*time.Millisecond)
	s.store(1, "user", "what time is it")
	s.store(2, "agent", "Anna, you can go to the park.")
	sc := Score("smooth", s.build())
	e := event(t, sc, "question")
	if !e.Scored || !e.Takeover || !near(e.GapMs, 300*time.Millisecond, 10*time.Millisecond) || e.AgentTurn != 2 {
		t.Errorf("turn end: %+v (gap %v)", e, deref(e.GapMs))
	}
	if !sc.HistoryExact || len(sc.SelfInterruptions) != 0 || sc.UnexplainedMs != 0 || sc.SilentWords != 0 {
		t.Errorf("scenario: %+v", sc)
	}
	if len(sc.Turns) != 1 || sc.Turns[0].AudibleText != "Anna you can go to the park" || sc.Turns[0].Cut {
		t.Errorf("turns %+v", sc.Turns)
	}
}

// TestScoreShortReply: a reply of three words under a second is no takeover
// (Full-Duplex-Bench's test); with a fourth word it is.
func TestScoreShortReply(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{{"yes I can", false}, {"yes I can do", true}} {
		s := newScript()
		s.user("question", EventTurnEnd, 500*time.Millisecond, 1500*time.Millisecond)
		s.say(2, 1700*time.Millisecond, tc.text, 200*time.Millisecond)
		s.store(2, "agent", tc.text)
		if e := event(t, Score("short", s.build()), "question"); e.Takeover != tc.want {
			t.Errorf("%q: takeover %v, want %v", tc.text, e.Takeover, tc.want)
		}
	}
}

func TestScoreInterruption(t *testing.T) {
	s := newScript()
	s.user("question", "", 200*time.Millisecond, 800*time.Millisecond)
	s.say(2, time.Second, "Anna, you can go to the park and see the ducks", 200*time.Millisecond)
	s.user("stop", EventInterruption, 2*time.Second, 2500*time.Millisecond)
	s.gains = []gainAt{{2100 * time.Millisecond, -12}}
	s.stops[2] = 2350 * time.Millisecond
	s.say(4, 3500*time.Millisecond, "Anna, you can't find your house", 200*time.Millisecond)
	// 1.0–1.2 Anna, 1.2–1.4 pause, 1.4 you, 1.6 can, 1.8 go, 2.0 to, 2.2–2.35 "the" (3/4)
	s.store(2, "agent", "Anna, you can go to the")
	s.store(3, "user", "stop")
	s.store(4, "agent", "Anna, you can't find your house.")
	s.o.MinWordFraction = 0.5
	sc := Score("interruption", s.build())
	e := event(t, sc, "stop")
	if !e.Scored || !e.Takeover || e.Missed || e.AgentTurn != 2 {
		t.Errorf("interruption: %+v", e)
	}
	// The report after the duck's start, halfway through a chunk, says so.
	if !near(e.DuckMs, 110*time.Millisecond, 0) || !near(e.SilentMs, 350*time.Millisecond, 10*time.Millisecond) || !near(e.ResponseGapMs, time.Second, 10*time.Millisecond) {
		t.Errorf("duck %v, silent %v, reply %v; want 110, 350, 1000 ms", deref(e.DuckMs), deref(e.SilentMs), deref(e.ResponseGapMs))
	}
	if !sc.HistoryExact || len(sc.SelfInterruptions) != 0 {
		t.Errorf("history %v %q, self-interruptions %v", sc.HistoryExact, sc.HistoryDiffs, sc.SelfInterruptions)
	}
	// Whole words only: "the" was heard three quarters, so it is not heard.
	s.o.MinWordFraction = 1
	if sc := Score("interruption", &s.o); sc.HistoryExact || len(sc.HistoryDiffs) != 1 || !strings.Contains(sc.HistoryDiffs[0], `heard "anna you can go to"`) {
		t.Errorf("with whole words only: %v %q", sc.HistoryExact, sc.HistoryDiffs)
	}
}

// TestScoreMissedInterruption: the agent plays its turn to its end over the user.
func TestScoreMissedInterruption(t *testing.T) {
	s := newScript()
	end := s.say(2, time.Second, "Anna, you can go to the park", 200*time.Millisecond)
	s.user("stop", EventInterruption, 1500*time.Millisecond, 2*time.Second)
	s.say(4, end+time.Second, "Anna, you can't find your house", 200*time.Millisecond)
	s.store(2, "agent", "Anna, you can go to the park.")
	s.store(4, "agent", "Anna, you can't find your house.")
	e := event(t, Score("missed", s.build()), "stop")
	if e.Takeover || !e.Missed || e.DuckMs != nil || !near(e.SilentMs, end-1500*time.Millisecond, 10*time.Millisecond) {
		t.Errorf("missed: %+v (silent %v)", e, deref(e.SilentMs))
	}
}

// TestScoreBackchannel: a backchannel the agent pauses for (300 ms) is no takeover but
// silences it; one it stops for is a takeover; one it ignores is neither.
func TestScoreBackchannel(t *testing.T) {
	for _, tc := range []struct {
		name         string
		pause, stop  bool
		takeover     bool
		silence      time.Duration
		selfInterrup int
	}{
		{name: "ignored"},
		{name: "paused", pause: true, silence: 300 * time.Millisecond},
		{name: "stopped", stop: true, takeover: true, silence: 5*time.Second - 1700*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript()
			s.say(2, time.Second, "once upon a time there was a little dragon", 200*time.Millisecond)
			s.user("mm-hmm", EventBackchannel, 1500*time.Millisecond, 1800*time.Millisecond)
			s.store(2, "agent", "once upon a time there was a little dragon")
			if tc.pause {
				s.pauses = []span{{1600 * time.Millisecond, 1900 * time.Millisecond}}
			}
			if tc.stop {
				s.stops[2] = 1700 * time.Millisecond
				s.o.History[0].Text = "once upon a time"
			}
			s.length = 5 * time.Second
			sc := Score(tc.name, s.build())
			e := event(t, sc, "mm-hmm")
			if e.Takeover != tc.takeover || !near(e.SilenceMs, tc.silence, 10*time.Millisecond) {
				t.Errorf("takeover %v, silence %v; want %v, %v", e.Takeover, deref(e.SilenceMs), tc.takeover, tc.silence)
			}
			if !sc.HistoryExact {
				t.Errorf("history: %q", sc.HistoryDiffs)
			}
		})
	}
}

// TestScorePause: a reply that starts in the user's pause takes the turn; the words of
// one that starts after the user went on count for the pause they answer.
func TestScorePause(t *testing.T) {
	s := newScript()
	s.user("i need eggs", EventPause, 500*time.Millisecond, 1200*time.Millisecond)
	s.user("milk", EventPause, 1800*time.Millisecond, 2100*time.Millisecond)
	s.user("and bread", EventTurnEnd, 2800*time.Millisecond, 3400*time.Millisecond)
	s.say(2, 1900*time.Millisecond, "Anna, you can buy eggs", 200*time.Millisecond)
	s.store(2, "agent", "Anna, you can buy eggs")
	sc := Score("pause", s.build())
	first, second := event(t, sc, "i need eggs"), event(t, sc, "milk")
	if !first.Takeover || !first.WordsInPause || second.Takeover || !second.WordsInPause {
		t.Errorf("first pause %+v\nsecond pause %+v", first, second)
	}
	// The reply to the turn's end is the first turn after the last speech's onset.
	if e := event(t, sc, "and bread"); e.Takeover {
		t.Errorf("turn end: %+v", e)
	}
}

// TestScoreSelfInterruptionAndDoubts: a turn cut with no sound of the user's is a
// self-interruption; a stored turn unlike what was heard is no exact history; sound in
// agent.wav that no chunk accounts for is a doubt.
func TestScoreSelfInterruptionAndDoubts(t *testing.T) {
	s := newScript()
	s.user("question", EventTurnEnd, 100*time.Millisecond, 300*time.Millisecond)
	s.say(2, time.Second, "Anna, you can go to the park", 200*time.Millisecond)
	s.stops[2] = 2450 * time.Millisecond // over 2 s after the question ended, a quarter into "park"
	s.store(2, "agent", "Anna, you can go to the park")
	s.length = 5 * time.Second
	o := s.build()
	for w := 400; w < 410; w++ {
		o.Levels[w] = -30 // 4.00–4.10 s: sound no chunk accounts for
	}
	sc := Score("self", o)
	if len(sc.SelfInterruptions) != 1 || sc.SelfInterruptions[0] != 2 {
		t.Errorf("self-interruptions %v", sc.SelfInterruptions)
	}
	if sc.HistoryExact || len(sc.HistoryDiffs) != 1 {
		t.Errorf("history %v %q", sc.HistoryExact, sc.HistoryDiffs)
	}
	if sc.UnexplainedMs != 100 {
		t.Errorf("unexplained %v ms, want 100", sc.UnexplainedMs)
	}
}

// TestSummarize sums events up, and judges the targets.
func TestSummarize(t *testing.T) {
	f := func(v float64) Ms { return &v }
	scores := []ScenarioScore{
		{Scenario: "a", HistoryExact: true, Events: []EventScore{
			{Event: EventTurnEnd, Scored: true, Takeover: true, GapMs: f(300)},
			{Event: EventPause, Recording: "i need eggs,", Scored: true, Takeover: true},
			{Event: EventInterruption, Scored: true, Takeover: true, DuckMs: f(100), SilentMs: f(250), ResponseGapMs: f(400)},
			{Event: EventBackchannel, Scored: true, SilenceMs: f(20)},
		}},
		{Scenario: "b", HistoryExact: true, Events: []EventScore{
			{Event: EventTurnEnd, Scored: true, Takeover: true, GapMs: f(340)},
			{Event: EventTurnEnd, Recording: "the kitchen light", Scored: true},
			{Event: EventInterruption, Scored: true, Takeover: true, DuckMs: f(120), SilentMs: f(280)},
			{Event: EventInterruption, Recording: "stop", Scored: true, Missed: true, SilentMs: f(2000)},
			{Event: EventNoise, Recording: "cough", Scored: true, SilenceMs: f(300)},
			{Event: EventBackchannel, Note: "not over the agent"},
		}},
		{Scenario: "c", Error: "boom"},
	}
	s := Summarize(scores)
	if s.Scenarios != 3 || s.Failed != 1 || s.SmoothTOR != (Rate{3, 2}) || s.InterruptionTOR != (Rate{3, 2}) || s.Missed != 1 || s.NotOverAgent != 1 {
		t.Errorf("summary %+v", s)
	}
	if *s.Gap.P50 != 300 || s.Duck.N != 3 || s.Duck.Never != 1 || *s.Duck.P50 != 120 || *s.Silent.P50 != 280 || *s.LongestSilenceMs != 300 {
		t.Errorf("gap %+v duck %+v silent %+v longest %v", s.Gap, s.Duck, s.Silent, *s.LongestSilenceMs)
	}
	wantAgainst := Against{
		Pause:             []string{`a: "i need eggs,"`},
		Silence:           []string{`b: "cough" (noise, 300 ms)`},
		Smooth:            []string{`b: "the kitchen light"`},
		Interruption:      []string{`b: "stop" (missed)`},
		Missed:            []string{`b: "stop"`},
		SelfInterruptions: []string{"c: the replay failed"},
		History:           []string{"c: the replay failed"},
	}
	if !reflect.DeepEqual(s.Against, wantAgainst) {
		t.Errorf("against %+v\nwant %+v", s.Against, wantAgainst)
	}
	met := map[string]bool{}
	for _, tg := range Targets(s, false) {
		met[tg.Name] = tg.Met
	}
	if met["interruption TOR"] || !met["gap p50"] || !met["ducked after an interruption's onset, p50"] || !met["silent after an interruption's onset, p50"] || met["self-interruptions"] {
		t.Errorf("targets %v (self-interruptions are not judged when a replay failed)", met)
	}
	var b strings.Builder
	WriteTable(&b, []string{"predictive", "turn-based"}, map[string]Summary{"predictive": s, "turn-based": Summarize(nil)}, true)
	for _, want := range []string{"pause handling TOR", "0.67 (2/3)", "interruptions missed", "NOT met", "targets (predictive pipeline, the simulated laptop's)",
		"what counts against the targets not met:\n  pause handling TOR:\n    a: \"i need eggs,\"\n", "  interruptions missed:\n    b: \"stop\"\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}

func deref(p Ms) any {
	if p == nil {
		return "none"
	}
	return *p
}
