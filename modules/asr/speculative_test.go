package asr

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
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

func (e *sideScripted) FinalOf(ctx context.Context, samples []float32) (Hypothesis, error) {
	e.record(fmt.Sprintf("finalof %d", len(samples)))
	n := e.nFinalOf
	e.nFinalOf++
	if n == 0 && e.blockFirst {
		close(e.started)
		<-ctx.Done()
		e.record("finalof cancelled")
		return Hypothesis{}, ctx.Err()
	}
	return e.words(e.finals[min(n, len(e.finals)-1)]), nil
}

// debugLog returns a logger that keeps every entry for the test to read.
func debugLog() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// committed returns, per committed utterance, whether its final decode was speculative.
func committed(logs *observer.ObservedLogs) []bool {
	var out []bool
	for _, e := range logs.FilterMessage("utterance committed").All() {
		out = append(out, e.ContextMap()["speculative"].(bool))
	}
	return out
}

// dropped returns why speculative final decodes were dropped.
func dropped(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.FilterMessage("speculative final dropped").All() {
		out = append(out, e.ContextMap()["why"].(string))
	}
	return out
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
	var utts [2][]Utterance
	for i, speculative := range []bool{true, false} {
		t.Run(fmt.Sprintf("speculative=%v", speculative), func(t *testing.T) {
			cfg.Speculative = speculative
			e := &sideScripted{scripted: scripted{partials: []string{"go", "go forward", "go forward ten"}}, finals: []string{"go forward ten meters"}}
			log, logs := debugLog()
			got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, log)
			if err != nil {
				t.Fatal(err)
			}
			utts[i] = contract(t, got)
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
				if c := committed(logs); !slices.Equal(c, []bool{true}) {
					t.Errorf("commits (speculative?) %v", c)
				}
			} else {
				if fin < eot {
					t.Errorf("engine calls %q: the final decode should follow the end of turn", calls)
				}
				if c := committed(logs); !slices.Equal(c, []bool{false}) {
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
	log, logs := debugLog()
	got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, log)
	if err != nil {
		t.Fatal(err)
	}
	utts := contract(t, got)
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
	if d := dropped(logs); !slices.Equal(d, []string{"speech resumed"}) {
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
	log, logs := debugLog()
	got, err := runDriver(t, scriptedConfig(), e, driver(steps, false), false, log)
	if err != nil {
		t.Fatal(err)
	}
	utts := contract(t, got)
	if len(utts) != 1 || utts[0].Text != "fresh" {
		t.Fatalf("utterances %+v", utts)
	}
	calls := e.calls()
	decodes := slices.DeleteFunc(slices.Clone(calls), func(c string) bool { return !strings.HasPrefix(c, "finalof ") || c == "finalof cancelled" })
	if !slices.Contains(calls, "finalof cancelled") || len(decodes) != 2 {
		t.Fatalf("engine calls %q", calls)
	}
	if d := dropped(logs); !slices.Equal(d, []string{"speech resumed"}) {
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
	log, logs := debugLog()
	got, err := runDriver(t, cfg, e, markingDriver(steps, true, e.record), true, log)
	if err != nil {
		t.Fatal(err)
	}
	utts := contract(t, got)
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
	if d := dropped(logs); len(d) != 1 || !strings.Contains(d[0], "end of turn") {
		t.Errorf("dropped speculations %q", d)
	}
	if c := committed(logs); !slices.Equal(c, []bool{false}) {
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
		contract(t, got)
		calls := e.calls()
		if eot := slices.Index(calls, "eot"); eot < 0 || !strings.HasPrefix(calls[len(calls)-1], "final ") || eot > len(calls)-2 {
			t.Fatalf("speculative=%v: engine calls %q", speculative, calls)
		}
		traces[i] = trace(got)
	}
	if !slices.Equal(traces[0], traces[1]) {
		t.Errorf("updates with speculation %q, without %q", traces[0], traces[1])
	}
}

// TestPocketsphinxSpeculativeMatchesTurnEnd replays shared recordings through the real
// VAD and pocketsphinx: with speculation every turn commits a speculative final decode,
// and the utterances (text, word times, confidences) are exactly those of final decodes
// started at the end of turn.
func TestPocketsphinxSpeculativeMatchesTurnEnd(t *testing.T) {
	needPocketsphinx(t)
	files := []string{"goforward.wav", "austen-0880.wav", "jfk.wav", "v2j_what_time_is_it.wav"}
	if testing.Short() {
		files = []string{"goforward.wav", "jfk.wav"}
	}
	ref, err := NewPocketsphinxEngine(DefaultPocketsphinxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			path := testenv.SharedFile(t, "audio/"+name)
			var utts [2][]Utterance
			var logs [2]*observer.ObservedLogs
			for i, speculative := range []bool{true, false} {
				e, err := NewPocketsphinxEngine(DefaultPocketsphinxConfig())
				if err != nil {
					t.Fatal(err)
				}
				cfg := DefaultConfig()
				cfg.Speculative = speculative
				var log *zap.Logger
				log, logs[i] = debugLog()
				run := runPipeline(t, path, cfg, e, pipelineOptions{log: log})
				e.Close()
				utts[i] = contract(t, run.asr)
				if len(utts[i]) == 0 {
					t.Fatal("no utterance")
				}
			}
			if !reflect.DeepEqual(utts[0], utts[1]) {
				t.Fatalf("utterances with speculation\n%+v\nwithout\n%+v", utts[0], utts[1])
			}
			checkFinals(t, utts[0], streamAudio(t, path), ref)
			spec, plain := committed(logs[0]), committed(logs[1])
			if len(spec) != len(utts[0]) || slices.Contains(spec, false) {
				t.Errorf("with speculation, commits (speculative?) %v", spec)
			}
			if len(plain) != len(utts[1]) || slices.Contains(plain, true) {
				t.Errorf("without speculation, commits (speculative?) %v", plain)
			}
			d := dropped(logs[0])
			if name == "jfk.wav" && !slices.Contains(d, "speech resumed") {
				// Its last turn has two segments 0.5 s apart: the end of the first
				// starts a speculation that the second drops.
				t.Errorf("jfk: dropped speculations %q, want one dropped when speech resumed", d)
			}
			var text []string
			for _, u := range utts[0] {
				text = append(text, u.Text)
			}
			t.Logf("%d utterances %q; speculations dropped: %q", len(utts[0]), text, d)
		})
	}
}

// TestPocketsphinxFinalOf checks the engine's side decode: FinalOf gives exactly what
// Start, Feed, Final give (words, times, confidences), whether the streaming pass has an
// utterance open or not, and leaves the streaming pass exactly as a twin engine that
// never ran FinalOf.
func TestPocketsphinxFinalOf(t *testing.T) {
	needPocketsphinx(t)
	ctx := context.Background()
	newEngine := func(cfg PocketsphinxConfig) *PocketsphinxEngine {
		e, err := NewPocketsphinxEngine(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	ref, e, twin := newEngine(DefaultPocketsphinxConfig()), newEngine(DefaultPocketsphinxConfig()), newEngine(DefaultPocketsphinxConfig())
	// Both streaming engines heard something before, so that their live cepstral mean
	// is not the initial one.
	warm := benchAudio(t, "jfk.wav")[:2*audio.PipelineRate]
	hop := int(audio.DurationToSamples(DefaultConfig().Hop, audio.PipelineRate))
	streamDecode(t, e, warm, hop)
	streamDecode(t, twin, warm, hop)
	must := func(h Hypothesis, err error) Hypothesis {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, name := range []string{"goforward.wav", "v2j_what_time_is_it.wav"} {
		samples := benchAudio(t, name)
		if err := ref.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := ref.Feed(ctx, samples); err != nil {
			t.Fatal(err)
		}
		want := must(ref.Final(ctx))
		if len(want.Words) == 0 {
			t.Fatalf("%s: nothing recognised", name)
		}
		half := len(samples) / 2
		for _, en := range []*PocketsphinxEngine{e, twin} {
			if err := en.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := en.Feed(ctx, samples[:half]); err != nil {
				t.Fatal(err)
			}
		}
		// On the side, while the streaming pass has half the recording.
		if got := must(e.FinalOf(ctx, samples)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: FinalOf during streaming\n%+v\nwant\n%+v", name, got, want)
		}
		if got, tw := must(e.Partial(ctx)), must(twin.Partial(ctx)); !reflect.DeepEqual(got, tw) {
			t.Errorf("%s: partial after FinalOf %q, without %q", name, got.Text(), tw.Text())
		}
		for _, en := range []*PocketsphinxEngine{e, twin} {
			if err := en.Feed(ctx, samples[half:]); err != nil {
				t.Fatal(err)
			}
		}
		if got, tw := must(e.Partial(ctx)), must(twin.Partial(ctx)); !reflect.DeepEqual(got, tw) {
			t.Errorf("%s: partial of the whole recording after FinalOf %q, without %q", name, got.Text(), tw.Text())
		}
		if got := must(e.Final(ctx)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Final after FinalOf %q, want %q", name, got.Text(), want.Text())
		}
		must(twin.Final(ctx))
		// Between utterances (no streaming utterance open).
		if got := must(e.FinalOf(ctx, samples)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: FinalOf between utterances\n%+v\nwant\n%+v", name, got, want)
		}
	}
	if h := must(e.FinalOf(ctx, nil)); len(h.Words) != 0 {
		t.Errorf("FinalOf(nothing) = %q", h.Text())
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.FinalOf(cancelled, warm); !errors.Is(err, context.Canceled) {
		t.Errorf("FinalOf with a cancelled context: %v", err)
	}

	cfg := DefaultPocketsphinxConfig()
	cfg.FinalPass = false
	streaming := newEngine(cfg)
	if streaming.StatelessFinal() {
		t.Error("without the final pass the final hypothesis is stateful")
	}
	if _, err := streaming.FinalOf(ctx, warm); !errors.Is(err, ErrStatefulFinal) {
		t.Errorf("FinalOf without the final pass: %v", err)
	}
}
