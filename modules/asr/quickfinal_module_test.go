package asr_test

import (
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/asr/asrtest"
)

// quickScripted is a side-decoding scripted engine whose partials may be finals
// (asr.QuickFinals), as whisper's are without full_final.
type quickScripted struct {
	sideScripted
	quick bool
}

func (e *quickScripted) QuickFinals() bool { return e.quick }

// TestModuleQuickFinals: with quick finals the final of a turn is the latest partial
// once a partial decoded all of the speech (no FinalOf), at a pause a partial runs at
// once whatever the hop, and without a covering partial, or with full finals, FinalOf
// decodes the utterance.
func TestModuleQuickFinals(t *testing.T) {
	plain := []step{{frames: 20}, {onset: true}, {frames: 50}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
	paused := []step{{frames: 20}, {onset: true}, {frames: 50}, {pause: true}, {frames: 3}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
	tests := []struct {
		name    string
		quick   bool
		hop     time.Duration
		atPause bool
		steps   []step
		// want is the utterance's text: the last partial's, or the FinalOf's.
		want      string
		wantFinal bool
	}{
		{name: "partials cover the speech", quick: true, hop: 100 * time.Millisecond, steps: plain, want: "go forward ten"},
		{name: "full finals", quick: false, hop: 100 * time.Millisecond, steps: plain, want: "go forward ten meters", wantFinal: true},
		{name: "no partial covers the speech", quick: true, hop: time.Hour, steps: plain, want: "go forward ten meters", wantFinal: true},
		{name: "a partial at the pause", quick: true, hop: time.Hour, atPause: true, steps: paused, want: "go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := scriptedConfig()
			cfg.Hop = tt.hop
			cfg.EmitUnstable = true
			cfg.SpeculateAtPause = tt.atPause
			e := &quickScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"go", "go forward", "go forward ten"}}, finals: []string{"go forward ten meters"}}, quick: tt.quick}
			got, err := runDriver(t, cfg, e, markingDriver(tt.steps, true, e.record), true, nil)
			if err != nil {
				t.Fatal(err)
			}
			utts := asrtest.Contract(t, got)
			if len(utts) != 1 || utts[0].Text != tt.want {
				t.Fatalf("utterances %+v, want one %q", utts, tt.want)
			}
			calls := strings.Join(e.calls(), ",")
			if gotFinal := strings.Contains(calls, "finalof"); gotFinal != tt.wantFinal {
				t.Errorf("engine calls %s: FinalOf called %v, want %v", calls, gotFinal, tt.wantFinal)
			}
			if tt.atPause && !strings.Contains(calls, "pause,start,partial") {
				t.Errorf("engine calls %s: no partial right after the pause", calls)
			}
		})
	}
}

var _ asr.QuickFinals = (*quickScripted)(nil)

// TestModuleQuickFinalAtEndOfTurn: when the end of turn comes before the trailing audio
// after the speech is in, a partial that decoded all of the speech is the final at once,
// without waiting for that audio.
func TestModuleQuickFinalAtEndOfTurn(t *testing.T) {
	// The speech ends at 1.35 s by the end of turn, which comes at 1.4 s: the trailing
	// audio runs to 1.65 s, but the partials decoded the audio to 1.4 s.
	steps := []step{{frames: 20}, {onset: true}, {frames: 50}, {eot: true, eotEnd: 1350 * time.Millisecond}, {frames: 30}}
	cfg := scriptedConfig()
	cfg.Speculative = false
	e := &quickScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"go", "go forward", "go forward ten"}}, finals: []string{"go forward ten meters"}}, quick: true}
	log, logs := asrtest.DebugLog()
	got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, log)
	if err != nil {
		t.Fatal(err)
	}
	if utts := asrtest.Contract(t, got); len(utts) != 1 || utts[0].Text != "go forward ten" {
		t.Fatalf("utterances %+v", utts)
	}
	commits := logs.FilterMessage("utterance committed").All()
	if len(commits) != 1 {
		t.Fatalf("%d commits", len(commits))
	}
	if d := commits[0].ContextMap()["end_of_turn_to_commit"]; d != time.Duration(0) {
		t.Errorf("committed %v after the end of turn, want at once", d)
	}
}
