package asr_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/asr/asrtest"
)

// peekScripted is a sideScripted engine whose streaming pass gives its own finals
// (Peeker) when own is set: PeekFinal is logged with the samples fed so far and returns
// the finals in turn, as FinalOf does.
type peekScripted struct {
	sideScripted
	own bool
}

func (e *peekScripted) OwnFinal() bool { return e.own }

func (e *peekScripted) PeekFinal(ctx context.Context) (asr.Hypothesis, error) {
	e.record(fmt.Sprintf("peek %d", e.fed))
	n := e.nFinalOf
	e.nFinalOf++
	return e.words(e.finals[min(n, len(e.finals)-1)]), nil
}

// TestModulePeeksOwnFinals: with an engine whose final is its own, the speculation at
// the segment's end feeds the streaming pass up to Trailing after the speech (no partial
// feeds past it) and peeks; the end of turn commits it. Without speculation the final at
// the end of turn peeks at exactly the same audio.
func TestModulePeeksOwnFinals(t *testing.T) {
	steps := []step{{frames: 20}, {onset: true}, {frames: 50}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
	cfg := scriptedConfig()
	start := 400*time.Millisecond - cfg.PreRoll
	want := fmt.Sprintf("peek %d", samplesFor(start, 1200*time.Millisecond+cfg.Trailing))
	var utts [2][]asr.Utterance
	for i, speculative := range []bool{true, false} {
		cfg.Speculative = speculative
		e := &peekScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"go", "go forward"}}, finals: []string{"go forward ten meters"}}, own: true}
		log, logs := asrtest.DebugLog()
		got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, log)
		if err != nil {
			t.Fatal(err)
		}
		utts[i] = asrtest.Contract(t, got)
		if len(utts[i]) != 1 || utts[i][0].Text != "go forward ten meters" {
			t.Fatalf("speculative=%v: utterances %+v", speculative, utts[i])
		}
		calls := strings.Join(e.calls(), ",")
		if strings.Count(calls, "peek") != 1 || !strings.Contains(calls, want) || strings.Contains(calls, "finalof") || strings.Contains(calls, "final ") {
			t.Errorf("speculative=%v: engine calls %s; want one %q and no other final", speculative, calls, want)
		}
		peek, eot := slices.Index(e.calls(), want), slices.Index(e.calls(), "eot")
		if speculative != (peek < eot) {
			t.Errorf("speculative=%v: engine calls %s", speculative, calls)
		}
		if c := asrtest.Committed(logs); !slices.Equal(c, []bool{speculative}) {
			t.Errorf("speculative=%v: commits (speculative?) %v", speculative, c)
		}
	}
	if !slices.EqualFunc(utts[0], utts[1], func(a, b asr.Utterance) bool { return fmt.Sprint(a) == fmt.Sprint(b) }) {
		t.Errorf("utterances with speculation %+v, without %+v", utts[0], utts[1])
	}
}

// TestModulePeekResumes: a peek at a pause the speech goes on after is dropped, the
// streaming pass is fed on (the engine decodes again what it needs), and the next pause
// peeks again; the utterance commits that.
func TestModulePeekResumes(t *testing.T) {
	cfg := scriptedConfig()
	cfg.SpeculateAtPause = true
	cfg.Trailing = 70 * time.Millisecond
	steps := []step{{frames: 20}, {onset: true}, {frames: 35}, {pause: true}, {frames: 3}, {resume: true}, {frames: 27},
		{pause: true}, {frames: 3}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
	e := &peekScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"a", "a b"}}, finals: []string{"stale", "fresh words"}}, own: true}
	got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if utts := asrtest.Contract(t, got); len(utts) != 1 || utts[0].Text != "fresh words" {
		t.Fatalf("utterances %+v (want the peek after the second pause)", utts)
	}
	// Each peek covers the speech and Trailing after it, and what partial decodes had
	// fed of the silence before the pause was reported (without tentative pauses, which
	// stop them sooner, up to a hop).
	start := 400*time.Millisecond - cfg.PreRoll
	calls := e.calls()
	var peeks []int
	for i, c := range calls {
		var n int
		if _, err := fmt.Sscanf(c, "peek %d", &n); err == nil {
			peeks = append(peeks, i)
			end := []time.Duration{1000 * time.Millisecond, 1600 * time.Millisecond}[min(len(peeks)-1, 1)] + cfg.Trailing
			if lo, hi := samplesFor(start, end), samplesFor(start, end+cfg.Hop); n < lo || n > hi {
				t.Errorf("peek %d covers %d samples, want %d to %d", len(peeks), n, lo, hi)
			}
		}
	}
	if len(peeks) != 2 || !slices.Contains(calls[peeks[0]:peeks[1]], "partial") {
		t.Errorf("engine calls %q; want a peek, partials, then a peek", calls)
	}
}

// TestModuleTentativePause: a tentative pause stops the streaming pass at Trailing after
// the end it announces; an engine's own final is peeked at then, at exactly that audio,
// while a final pass waits for the pause to be sure.
func TestModuleTentativePause(t *testing.T) {
	cfg := scriptedConfig()
	cfg.SpeculateAtPause = true
	cfg.Trailing = 70 * time.Millisecond
	start := 400*time.Millisecond - cfg.PreRoll
	for _, own := range []bool{true, false} {
		steps := []step{{frames: 20}, {onset: true}, {frames: 50}, {pause: true, tentative: true}, {frames: 3}, {sure: true}, {frames: 3}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
		e := &peekScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"go"}}, finals: []string{"go forward"}}, own: own}
		got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if utts := asrtest.Contract(t, got); len(utts) != 1 || utts[0].Text != "go forward" {
			t.Fatalf("own %v: utterances %+v", own, utts)
		}
		end := 1400*time.Millisecond - tentativeLag + cfg.Trailing
		want, after := fmt.Sprintf("peek %d", samplesFor(start, end)), "pause"
		if !own {
			want, after = fmt.Sprintf("finalof %d", samplesFor(start, end)), "sure"
		}
		calls := e.calls()
		i, mark := slices.Index(calls, want), slices.Index(calls, after)
		if i < 0 || i < mark || strings.Count(strings.Join(calls, ","), strings.Fields(want)[0]) != 1 {
			t.Errorf("own %v: engine calls %q; want one %q after the %s", own, calls, want, after)
		}
	}
}

// TestModuleFinalOfWhenNotOwn: an engine that says its final is not its own (not
// adapted yet) gets FinalOf, as does an utterance that began over the agent's voice.
func TestModuleFinalOfWhenNotOwn(t *testing.T) {
	cfg := scriptedConfig()
	start := 400*time.Millisecond - cfg.PreRoll
	want := fmt.Sprintf("finalof %d", samplesFor(start, 1200*time.Millisecond+cfg.Trailing))
	for _, tc := range []struct {
		name         string
		own, overlap bool
	}{{"not adapted", false, false}, {"over the agent", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			steps := []step{{frames: 20}, {onset: true, overlap: tc.overlap}, {frames: 50}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
			e := &peekScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"x"}}, finals: []string{"words"}}, own: tc.own}
			got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, nil)
			if err != nil {
				t.Fatal(err)
			}
			if utts := asrtest.Contract(t, got); len(utts) != 1 || utts[0].Text != "words" {
				t.Fatalf("utterances %+v", utts)
			}
			calls := strings.Join(e.calls(), ",")
			if strings.Contains(calls, "peek") || strings.Count(calls, "finalof") != 1 || !strings.Contains(calls, want) {
				t.Errorf("engine calls %s; want one %q and no peek", calls, want)
			}
		})
	}
}

// TestModuleBargeInPeeks: an utterance that began over the agent's voice peeks when the
// agent was no longer audible at its pause (a barge-in stopped it), and gets FinalOf
// when it still was (a backchannel).
func TestModuleBargeInPeeks(t *testing.T) {
	cfg := scriptedConfig()
	cfg.SpeculateAtPause = true
	for _, agentAudible := range []bool{false, true} {
		steps := []step{{frames: 20}, {onset: true, overlap: true}, {frames: 50}, {pause: true, overlap: agentAudible}, {frames: 10}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
		e := &peekScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"x"}}, finals: []string{"go forward"}}, own: true}
		got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if utts := asrtest.Contract(t, got); len(utts) != 1 || utts[0].Text != "go forward" {
			t.Fatalf("utterances %+v", utts)
		}
		calls := strings.Join(e.calls(), ",")
		if peeked := strings.Contains(calls, "peek"); peeked == agentAudible || strings.Contains(calls, "finalof") != agentAudible {
			t.Errorf("agent audible at the pause %v: engine calls %s", agentAudible, calls)
		}
	}
}
