package asr_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/asr/asrtest"
)

// sideScripted is a scripted engine that also decodes finals on the side (FinalDecoder).
// Its FinalOf calls return finals in turn (the last repeats) and are logged with the
// number of samples, in the same log as the other engine calls and the driver's marks.
type sideScripted struct {
	scripted
	finals []string
	// blockFirst makes the first FinalOf wait for its context to be cancelled; started
	// is closed when it has begun.
	blockFirst bool
	started    chan struct{}

	nFinalOf int // owned by the worker that holds the engine
}

func (e *sideScripted) StatelessFinal() bool { return true }

func (e *sideScripted) FinalOf(ctx context.Context, samples []float32) (asr.Hypothesis, error) {
	e.record(fmt.Sprintf("finalof %d", len(samples)))
	n := e.nFinalOf
	e.nFinalOf++
	if n == 0 && e.blockFirst {
		close(e.started)
		<-ctx.Done()
		e.record("finalof cancelled")
		return asr.Hypothesis{}, ctx.Err()
	}
	return e.words(e.finals[min(n, len(e.finals)-1)]), nil
}

// samplesFor is the number of samples between two stream times.
func samplesFor(from, to time.Duration) int {
	return int(audio.DurationToSamples(to, audio.PipelineRate) - audio.DurationToSamples(from, audio.PipelineRate))
}

// TestModuleSpeculativeFinal checks on the virtual clock that the final decode starts
// before the end of turn arrives, once Trailing audio after the segment's end is in,
// decodes exactly the audio a final decode at the end of turn decodes, and commits the
// same utterance.
func TestModuleSpeculativeFinal(t *testing.T) {
	// 400 ms of silence, the onset, 1 s of speech, the segment's end (reported 200 ms
	// after the speech ended at 1.2 s), 600 ms more, the end of turn, 200 ms more.
	steps := []step{{frames: 20}, {onset: true}, {frames: 50}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
	cfg := scriptedConfig()
	// The final decode covers the pre-roll before the onset to Trailing after the speech.
	want := fmt.Sprintf("finalof %d", samplesFor(400*time.Millisecond-cfg.PreRoll, 1200*time.Millisecond+cfg.Trailing))
	var utts [2][]asr.Utterance
	for i, speculative := range []bool{true, false} {
		t.Run(fmt.Sprintf("speculative=%v", speculative), func(t *testing.T) {
			cfg.Speculative = speculative
			e := &sideScripted{scripted: scripted{partials: []string{"go", "go forward", "go forward ten"}}, finals: []string{"go forward ten meters"}}
			log, logs := asrtest.DebugLog()
			got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, log)
			if err != nil {
				t.Fatal(err)
			}
			utts[i] = asrtest.Contract(t, got)
			if len(utts[i]) != 1 || utts[i][0].Text != "go forward ten meters" {
				t.Fatalf("utterances %+v", utts[i])
			}
			calls := e.calls()
			fin, eot := slices.Index(calls, want), slices.Index(calls, "eot")
			if fin < 0 || eot < 0 || strings.Count(strings.Join(calls, ","), "finalof") != 1 || slices.Contains(calls, "final") {
				t.Fatalf("engine calls %q; want one %q", calls, want)
			}
			if speculative {
				// Decoded before the end of turn, and nothing ran after the end of the
				// segment but the speculation: no partials of the silence after it.
				if fin > eot || fin != eot-1 {
					t.Errorf("engine calls %q: the final decode should come right before the end of turn", calls)
				}
				if c := asrtest.Committed(logs); !slices.Equal(c, []bool{true}) {
					t.Errorf("commits (speculative?) %v", c)
				}
			} else {
				if fin < eot {
					t.Errorf("engine calls %q: the final decode should follow the end of turn", calls)
				}
				if c := asrtest.Committed(logs); !slices.Equal(c, []bool{false}) {
					t.Errorf("commits (speculative?) %v", c)
				}
			}
		})
	}
	if !reflect.DeepEqual(utts[0], utts[1]) {
		t.Errorf("utterances with speculation\n%+v\nwithout\n%+v", utts[0], utts[1])
	}
}

// TestModuleSpeculationDroppedWhenSpeechResumes: a speculation whose turn goes on is
// dropped, partial decoding carries on, and the end of the next segment speculates
// again; the utterance commits the second decode's words.
func TestModuleSpeculationDroppedWhenSpeechResumes(t *testing.T) {
	steps := []step{
		{frames: 20}, {onset: true}, {frames: 30}, {end: true}, {frames: 15}, // speculation 1
		{onset: true}, {frames: 30}, {end: true}, {frames: 30}, // speech resumed; speculation 2
		{eot: true}, {frames: 10},
	}
	cfg := scriptedConfig()
	e := &sideScripted{scripted: scripted{partials: []string{"a", "a b", "a b c"}}, finals: []string{"stale", "fresh words"}}
	log, logs := asrtest.DebugLog()
	got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, log)
	if err != nil {
		t.Fatal(err)
	}
	utts := asrtest.Contract(t, got)
	if len(utts) != 1 || utts[0].Text != "fresh words" {
		t.Fatalf("utterances %+v", utts)
	}
	start := 400*time.Millisecond - cfg.PreRoll
	first := fmt.Sprintf("finalof %d", samplesFor(start, 1000*time.Millisecond-segLag+cfg.Trailing))
	second := fmt.Sprintf("finalof %d", samplesFor(start, 1900*time.Millisecond-segLag+cfg.Trailing))
	calls := e.calls()
	i1, i2, eot := slices.Index(calls, first), slices.Index(calls, second), slices.Index(calls, "eot")
	if i1 < 0 || i2 < 0 || !(i1 < i2 && i2 < eot) {
		t.Fatalf("engine calls %q; want %q, then %q before the end of turn", calls, first, second)
	}
	if !slices.Contains(calls[i1:i2], "partial") {
		t.Errorf("engine calls %q: no partial decode after speech resumed", calls)
	}
	if d := asrtest.Dropped(logs); !slices.Equal(d, []string{"speech resumed"}) {
		t.Errorf("dropped speculations %q", d)
	}
	if u := utts[0]; u.AudioEnd != 1900*time.Millisecond-segLag+cfg.Trailing {
		t.Errorf("utterance audio ends at %v", u.AudioEnd)
	}
}

// TestModuleSpeculationCancelled runs on the real clock with an engine whose first
// speculation never finishes by itself: resumed speech must cancel it.
func TestModuleSpeculationCancelled(t *testing.T) {
	started := make(chan struct{})
	steps := []step{
		{frames: 5}, {onset: true}, {frames: 30}, {end: true}, {frames: 20},
		{wait: started, onset: true}, {frames: 30}, {end: true}, {frames: 30},
		{eot: true}, {frames: 5},
	}
	e := &sideScripted{scripted: scripted{partials: []string{"x"}}, finals: []string{"stale", "fresh"}, blockFirst: true, started: started}
	log, logs := asrtest.DebugLog()
	got, err := runDriver(t, scriptedConfig(), e, driver(steps, false), false, log)
	if err != nil {
		t.Fatal(err)
	}
	utts := asrtest.Contract(t, got)
	if len(utts) != 1 || utts[0].Text != "fresh" {
		t.Fatalf("utterances %+v", utts)
	}
	calls := e.calls()
	decodes := slices.DeleteFunc(slices.Clone(calls), func(c string) bool { return !strings.HasPrefix(c, "finalof ") || c == "finalof cancelled" })
	if !slices.Contains(calls, "finalof cancelled") || len(decodes) != 2 {
		t.Fatalf("engine calls %q", calls)
	}
	if d := asrtest.Dropped(logs); !slices.Equal(d, []string{"speech resumed"}) {
		t.Errorf("dropped speculations %q", d)
	}
}

// TestModuleSpeculationEndOfTurnDisagrees: an end of turn whose speech ends elsewhere
// than the segment the speculation followed (another end-of-turn policy) gets a final
// decode of its own audio.
func TestModuleSpeculationEndOfTurnDisagrees(t *testing.T) {
	steps := []step{{frames: 20}, {onset: true}, {frames: 50}, {end: true}, {frames: 30}, {eot: true, eotEnd: 1300 * time.Millisecond}, {frames: 10}}
	cfg := scriptedConfig()
	e := &sideScripted{scripted: scripted{partials: []string{"x"}}, finals: []string{"stale", "fresh"}}
	log, logs := asrtest.DebugLog()
	got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, log)
	if err != nil {
		t.Fatal(err)
	}
	utts := asrtest.Contract(t, got)
	if len(utts) != 1 || utts[0].Text != "fresh" || utts[0].AudioEnd != 1300*time.Millisecond+cfg.Trailing {
		t.Fatalf("utterances %+v", utts)
	}
	start := 400*time.Millisecond - cfg.PreRoll
	want := []string{
		fmt.Sprintf("finalof %d", samplesFor(start, 1200*time.Millisecond+cfg.Trailing)),
		"eot",
		fmt.Sprintf("finalof %d", samplesFor(start, 1300*time.Millisecond+cfg.Trailing)),
	}
	if calls := e.calls(); !slices.Equal(calls[len(calls)-3:], want) {
		t.Fatalf("engine calls %q, want them to end with %q", calls, want)
	}
	if d := asrtest.Dropped(logs); len(d) != 1 || !strings.Contains(d[0], "end of turn") {
		t.Errorf("dropped speculations %q", d)
	}
	if c := asrtest.Committed(logs); !slices.Equal(c, []bool{false}) {
		t.Errorf("commits (speculative?) %v", c)
	}
}

// TestModuleSpeculativeNeedsStatelessFinal: with an engine that is no FinalDecoder the
// setting changes nothing: the final decode is Final at the end of turn.
func TestModuleSpeculativeNeedsStatelessFinal(t *testing.T) {
	steps := []step{{frames: 20}, {onset: true}, {frames: 50}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
	var traces [2][]string
	for i, speculative := range []bool{true, false} {
		cfg := scriptedConfig()
		cfg.Speculative = speculative
		e := &scripted{partials: []string{"a", "a b"}, final: "a b"}
		got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		asrtest.Contract(t, got)
		calls := e.calls()
		if eot := slices.Index(calls, "eot"); eot < 0 || !strings.HasPrefix(calls[len(calls)-1], "final ") || eot > len(calls)-2 {
			t.Fatalf("speculative=%v: engine calls %q", speculative, calls)
		}
		traces[i] = asrtest.Trace(got)
	}
	if !slices.Equal(traces[0], traces[1]) {
		t.Errorf("updates with speculation %q, without %q", traces[0], traces[1])
	}
}

// TestModuleSpeculatesAtPause: with SpeculateAtPause the final decode starts at the
// VAD's pause, before the segment's end confirms it, and covers Trailing after the end
// the pause announced; a pause the speech resumed after is void (its decode dropped),
// and the next one speculates again. The utterance commits the last decode's words.
func TestModuleSpeculatesAtPause(t *testing.T) {
	cfg := scriptedConfig()
	cfg.SpeculateAtPause = true
	cfg.Trailing = 70 * time.Millisecond
	start := 400*time.Millisecond - cfg.PreRoll
	t.Run("confirmed", func(t *testing.T) {
		// Speech from 0.4 s to 1.3 s; the pause 100 ms later, the segment's end 60 ms
		// after that.
		steps := []step{{frames: 20}, {onset: true}, {frames: 50}, {pause: true}, {frames: 3}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
		e := &sideScripted{scripted: scripted{partials: []string{"go", "go forward"}}, finals: []string{"go forward ten meters"}}
		got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if utts := asrtest.Contract(t, got); len(utts) != 1 || utts[0].Text != "go forward ten meters" {
			t.Fatalf("utterances %+v", utts)
		}
		want := fmt.Sprintf("finalof %d", samplesFor(start, 1300*time.Millisecond+cfg.Trailing))
		calls := e.calls()
		pause, fin, end := slices.Index(calls, "pause"), slices.Index(calls, want), slices.Index(calls, "end")
		if pause < 0 || fin < 0 || end < 0 || !(pause < fin && fin < end) || strings.Count(strings.Join(calls, ","), "finalof") != 1 {
			t.Errorf("engine calls %q; want one %q between the pause and the segment's end", calls, want)
		}
	})
	t.Run("trimmed", func(t *testing.T) {
		// As "confirmed", but the VAD dates the end 60 ms earlier, by the level
		// (vad.end_trim): the turn's speech ends there, and the final decodes the same
		// audio as without the trim.
		const trim = 60 * time.Millisecond
		steps := []step{{frames: 20}, {onset: true}, {frames: 50}, {pause: true, trim: trim}, {frames: 3}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
		e := &sideScripted{scripted: scripted{partials: []string{"go", "go forward"}}, finals: []string{"go forward ten meters"}}
		got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		utts := asrtest.Contract(t, got)
		if len(utts) != 1 || utts[0].Text != "go forward ten meters" || utts[0].End != 1300*time.Millisecond-trim {
			t.Fatalf("utterances %+v; want one ending at %v", utts, 1300*time.Millisecond-trim)
		}
		want := fmt.Sprintf("finalof %d", samplesFor(start, 1300*time.Millisecond+cfg.Trailing))
		if calls := e.calls(); !slices.Contains(calls, want) || strings.Count(strings.Join(calls, ","), "finalof") != 1 {
			t.Errorf("engine calls %q; want one %q", calls, want)
		}
	})
	t.Run("resumed", func(t *testing.T) {
		// A pause at 1.0 s the speech goes on after (merged into the segment), then the
		// real one at 1.6 s.
		steps := []step{{frames: 20}, {onset: true}, {frames: 35}, {pause: true}, {frames: 3}, {resume: true}, {frames: 27},
			{pause: true}, {frames: 3}, {end: true}, {frames: 30}, {eot: true}, {frames: 10}}
		e := &sideScripted{scripted: scripted{partials: []string{"a", "a b"}}, finals: []string{"stale", "fresh words"}}
		got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if utts := asrtest.Contract(t, got); len(utts) != 1 || utts[0].Text != "fresh words" {
			t.Fatalf("utterances %+v (want the decode after the second pause)", utts)
		}
		second := fmt.Sprintf("finalof %d", samplesFor(start, 1600*time.Millisecond+cfg.Trailing))
		if calls := e.calls(); !slices.Contains(calls, second) {
			t.Errorf("engine calls %q; want %q", calls, second)
		}
	})
}
