package asr_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/iu"
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

// plainTurn is a turn of one second of speech, its segment ended without a pause first;
// pausedTurn the same with the VAD's pause before the end.
func plainTurn() []step {
	return []step{{frames: 20}, {onset: true}, {frames: 50}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
}

func pausedTurn() []step {
	return []step{{frames: 20}, {onset: true}, {frames: 50}, {pause: true}, {frames: 3}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
}

// TestModuleQuickFinals: with quick finals the final of a turn is the latest partial
// once a partial decoded all of the speech (no FinalOf), at a pause a partial runs at
// once whatever the hop, and without a covering partial, or with full finals, FinalOf
// decodes the utterance.
func TestModuleQuickFinals(t *testing.T) {
	plain, paused := plainTurn(), pausedTurn()
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

// TestModuleQuickFinalWithinThePadding: the VAD pads the speech, and the padding is
// silence to it: a partial that decoded the speech up to where its pause says it stopped
// is the final, though it stops within the padding; without that end, a partial runs at
// the pause.
func TestModuleQuickFinalWithinThePadding(t *testing.T) {
	// The utterance's audio starts at 0.2 s and the pause says the speech ends at 1.3 s
	// padded; partials every 260 ms decode it to 1.24 s, the next one to 1.5 s.
	for _, tt := range []struct {
		pad          time.Duration
		partialAfter bool
	}{{0, true}, {60 * time.Millisecond, false}} {
		steps := []step{{frames: 20}, {onset: true}, {frames: 50}, {pause: true, pad: tt.pad}, {frames: 3}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
		cfg := scriptedConfig()
		cfg.Hop = 260 * time.Millisecond
		cfg.SpeculateAtPause = true
		e := &quickScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"go", "go forward", "go forward ten"}}, finals: []string{"go forward ten meters"}}, quick: true}
		got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if utts := asrtest.Contract(t, got); len(utts) != 1 || utts[0].Text != "go forward ten" {
			t.Fatalf("pad %v: utterances %+v", tt.pad, utts)
		}
		calls := strings.Join(e.calls(), ",")
		_, afterPause, _ := strings.Cut(calls, "pause")
		if strings.Contains(calls, "finalof") || strings.Contains(afterPause, "partial") != tt.partialAfter {
			t.Errorf("pad %v: engine calls %s, want a partial after the pause %v and no FinalOf", tt.pad, calls, tt.partialAfter)
		}
	}
}

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

// TestModuleSaysHowFarWordsReach: a recogniser that decodes the utterance again every hop
// sends, with each hypothesis, how far into the audio its words reach (asr.Decoded: one
// IU, updated to each partial's end, committed with the utterance); the words of the
// decode at the pause reach the pause. A streaming pass (a Peeker) sends none.
func TestModuleSaysHowFarWordsReach(t *testing.T) {
	steps := pausedTurn()
	cfg := scriptedConfig()
	cfg.Hop = 300 * time.Millisecond
	cfg.EmitUnstable = true
	cfg.SpeculateAtPause = true
	quick := &quickScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"go", "go forward", "go forward ten"}}, finals: []string{"go forward ten meters"}}, quick: true}
	got, err := runDriver(t, cfg, quick, markingDriver(steps, true, quick.record), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	asrtest.Contract(t, got)
	var tos []time.Duration
	var last iu.UpdateType
	for _, r := range got {
		if d, ok := r.Up.IU.Payload.(asr.Decoded); ok {
			last = r.Up.Type
			if r.Up.Type != iu.Commit {
				tos = append(tos, d.To)
			}
		}
	}
	t.Logf("decoded to %v", tos)
	// The speech ends at 1.3 s (the pause says so, pauseLag before the frame it came with).
	if len(tos) < 2 || !slices.IsSorted(tos) || tos[len(tos)-1] < 1300*time.Millisecond || last != iu.Commit {
		t.Errorf("decoded to %v (last update %v): want rising ends, the last at the pause or after, committed", tos, last)
	}

	peeker := &peekScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"go", "go forward"}}, finals: []string{"go forward"}}, own: true}
	got, err = runDriver(t, cfg, peeker, markingDriver(steps, true, peeker.record), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		if _, ok := r.Up.IU.Payload.(asr.Decoded); ok {
			t.Fatalf("a streaming pass sent %v", r.Up)
		}
	}
}

// hurriedScripted records when the module hurries it (asr.Hurried).
type hurriedScripted struct {
	quickScripted
}

func (e *hurriedScripted) Hurry(on bool) {
	if on {
		e.record("hurry")
	} else {
		e.record("calm")
	}
}

var _ asr.Hurried = (*hurriedScripted)(nil)

// TestModuleHurriesTheDecodesTheUserWaitsOn: the partials of a hop are calm; the
// partial at the pause that covers all of the speech, and the final decode, hurried.
func TestModuleHurriesTheDecodesTheUserWaitsOn(t *testing.T) {
	plain, paused := plainTurn(), pausedTurn()
	tests := []struct {
		name  string
		quick bool
		hop   time.Duration
		steps []step
		// want is in the engine's calls, notWant not.
		want, notWant string
	}{
		{name: "hop partials, then the final", hop: 100 * time.Millisecond, steps: plain, want: "calm,partial,hurry,finalof", notWant: "hurry,partial"},
		{name: "the partial at the pause", quick: true, hop: time.Hour, steps: paused, want: "pause,hurry,start,partial"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := scriptedConfig()
			cfg.Hop = tt.hop
			cfg.EmitUnstable = true
			cfg.SpeculateAtPause = true
			e := &hurriedScripted{quickScripted{sideScripted: sideScripted{scripted: scripted{partials: []string{"go", "go forward", "go forward ten"}}, finals: []string{"go forward ten meters"}}, quick: tt.quick}}
			if _, err := runDriver(t, cfg, e, markingDriver(tt.steps, true, e.record), true, nil); err != nil {
				t.Fatal(err)
			}
			calls := strings.Join(e.calls(), ",")
			if !strings.Contains(calls, tt.want) {
				t.Errorf("engine calls %s: no %q", calls, tt.want)
			}
			if tt.notWant != "" && strings.Contains(calls, tt.notWant) {
				t.Errorf("engine calls %s: %q", calls, tt.notWant)
			}
		})
	}
}
