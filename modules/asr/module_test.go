package asr_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/asr/asrtest"
	"github.com/parley-voice/parley/modules/vad"
	"go.uber.org/zap"
)

func durOf(n int64) time.Duration { return audio.SamplesToDuration(n, audio.PipelineRate) }

// scripted is an Engine whose partial hypotheses follow a script.
type scripted struct {
	partials []string // returned by successive Partial calls; the last repeats
	final    string
	failAt   string        // "partial" or "final": return an error there
	block    bool          // Partial waits for its context to be cancelled
	blocked  chan struct{} // closed when a blocking Partial has begun (with block)
	// feedBlocked, when set, makes the first Feed wait for its context to be cancelled
	// (after taking the samples); it is closed when that Feed has begun.
	feedBlocked chan struct{}

	mu       sync.Mutex // the test reads the log while workers may still write it
	log      []string
	fed      int
	nPartial int
}

func (e *scripted) record(s string) {
	e.mu.Lock()
	e.log = append(e.log, s)
	e.mu.Unlock()
}

func (e *scripted) calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

func (e *scripted) words(text string) asr.Hypothesis {
	var h asr.Hypothesis
	for i, w := range strings.Fields(text) {
		h.Words = append(h.Words, asr.HypWord{Text: w, Start: time.Duration(i) * 100 * time.Millisecond, End: time.Duration(i+1) * 100 * time.Millisecond, Confidence: 0.5})
	}
	return h
}

func (e *scripted) Start(ctx context.Context) error {
	e.record("start")
	e.fed = 0
	e.nPartial = 0
	return nil
}

func (e *scripted) Feed(ctx context.Context, s []float32) error {
	e.fed += len(s)
	e.mu.Lock()
	gate := e.feedBlocked
	e.feedBlocked = nil
	e.mu.Unlock()
	if gate != nil {
		close(gate)
		<-ctx.Done()
		e.record("feed cancelled")
	}
	return nil
}

func (e *scripted) Partial(ctx context.Context) (asr.Hypothesis, error) {
	e.record("partial")
	if e.failAt == "partial" {
		return asr.Hypothesis{}, errors.New("engine broke")
	}
	if e.block {
		e.mu.Lock()
		if e.blocked != nil {
			close(e.blocked)
			e.blocked = nil
		}
		e.mu.Unlock()
		<-ctx.Done()
		e.record("partial cancelled")
		return asr.Hypothesis{}, ctx.Err()
	}
	i := min(e.nPartial, len(e.partials)-1)
	e.nPartial++
	if i < 0 {
		return asr.Hypothesis{}, nil
	}
	return e.words(e.partials[i]), nil
}

func (e *scripted) Final(ctx context.Context) (asr.Hypothesis, error) {
	e.record(fmt.Sprintf("final %d", e.fed))
	if e.failAt == "final" {
		return asr.Hypothesis{}, errors.New("engine broke")
	}
	return e.words(e.final), nil
}

// step is one action of a driver: send frames of silence, a segment onset, a segment
// end, or an end of turn.
type step struct {
	frames int
	onset  bool
	// overlap marks the onset's segment as begun over the agent's voice, or the pause
	// as reported while the agent was audible.
	overlap bool
	// end commits the open segment, which ended segLag ago (the VAD reports an end once
	// its merge gap has passed).
	end bool
	// eot ends the turn. A segment still open is committed with it, ended 500 ms ago;
	// the end of turn's speech ends where the last segment ended, or at eotEnd when it
	// is not zero (an end-of-turn policy that disagrees with the segments).
	eot    bool
	eotEnd time.Duration
	// pause reports a pause of the open segment's speech, which ended pauseLag ago
	// (tentative: a tentative one, tentativeLag ago, which sure makes sure); resume
	// withdraws it (the speech went on). An end after a pause ends the segment where the pause said.
	pause, resume, tentative, sure bool
	// pad is the VAD's padding after the speech the pause reports (Pause.SpeechEnd is
	// its End less pad; 0: not said).
	pad time.Duration
	// trim dates the pause's end that much earlier, as vad.end_trim does (Pause.Trimmed);
	// the segment's end after it is the pause's.
	trim time.Duration
	// wait blocks the driver until the channel is closed (real clock only).
	wait <-chan struct{}
}

const (
	frameLen = 320 // 20 ms
	segLag   = 200 * time.Millisecond
	pauseLag = 100 * time.Millisecond
	// tentativeLag is how long after the speech a tentative pause comes.
	tentativeLag = 40 * time.Millisecond
)

// driver plays a script of audio frames and VAD IUs, one frame per 20 ms of the
// network clock when pace is set, as fast as possible otherwise.
func driver(steps []step, pace bool) iu.Module { return markingDriver(steps, pace, nil) }

// markingDriver is driver that calls mark("eot") right before it sends an end of turn,
// so that tests can place it among the engine's calls.
func markingDriver(steps []step, pace bool, mark func(string)) iu.Module {
	return iu.ModuleFunc{ModuleName: "driver", Fn: func(ctx context.Context, p *iu.Ports) error {
		start := p.Now()
		var pos, turnStart int64 = 0, -1
		var seg, pause iu.IU
		var segOpen, paused bool
		var speechEnd time.Duration
		for _, s := range steps {
			if s.wait != nil {
				select {
				case <-s.wait:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			switch {
			case s.onset:
				if turnStart < 0 {
					turnStart = pos
				}
				seg = p.NewIU(vad.Segment{Start: durOf(pos), Overlap: s.overlap})
				segOpen = true
				if err := p.Send(ctx, iu.AddOf(seg)); err != nil {
					return err
				}
			case s.pause:
				lag := pauseLag
				if s.tentative {
					lag = tentativeLag
				}
				pl := vad.Pause{End: durOf(pos) - lag - s.trim, Tentative: s.tentative, Overlap: s.overlap, Trimmed: s.trim}
				if s.pad > 0 {
					pl.SpeechEnd = pl.End - s.pad
				}
				pause, paused = p.NewIU(pl, seg.ID), true
				if mark != nil {
					mark("pause")
				}
				if err := p.Send(ctx, iu.AddOf(pause)); err != nil {
					return err
				}
			case s.sure:
				pl := pause.Payload.(vad.Pause)
				pl.Tentative = false
				if mark != nil {
					mark("sure")
				}
				if err := p.Send(ctx, iu.UpdateOf(pause, pl)); err != nil {
					return err
				}
				pause.Payload = pl
			case s.resume:
				paused = false
				if err := p.Send(ctx, iu.RevokeOf(pause)); err != nil {
					return err
				}
			case s.end:
				pl := seg.Payload.(vad.Segment)
				pl.End = durOf(pos) - segLag
				var ups []iu.Update
				if paused {
					pl.End, pl.Trimmed, paused = pause.Payload.(vad.Pause).End, pause.Payload.(vad.Pause).Trimmed, false
					ups = append(ups, iu.CommitOf(pause))
					if mark != nil {
						mark("end")
					}
				}
				seg.Payload, segOpen, speechEnd = pl, false, pl.End
				if err := p.Send(ctx, append(ups, iu.CommitOf(seg))...); err != nil {
					return err
				}
			case s.eot:
				var ups []iu.Update
				if segOpen {
					pl := seg.Payload.(vad.Segment)
					pl.End = durOf(pos - 8000) // the speech ended 500 ms ago
					seg.Payload, segOpen, speechEnd = pl, false, pl.End
					ups = append(ups, iu.CommitOf(seg))
				}
				end := speechEnd
				if s.eotEnd != 0 {
					end = s.eotEnd
				}
				e := p.NewIU(vad.EndOfTurn{SpeechStart: durOf(turnStart), SpeechEnd: end, Silence: durOf(pos) - end})
				turnStart = -1
				if mark != nil {
					mark("eot")
				}
				if err := p.Send(ctx, append(ups, iu.AddOf(e), iu.CommitOf(e))...); err != nil {
					return err
				}
			}
			for range s.frames {
				if pace {
					for {
						ev, err := p.Next(ctx, start.Add(durOf(pos)))
						if err != nil {
							return err
						}
						if ev.Kind == iu.EventDeadline {
							break
						}
					}
				}
				f := audio.Frame{Samples: make([]float32, frameLen), Rate: audio.PipelineRate, Channels: 1, Start: pos}
				u := p.NewIU(f)
				if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
					return err
				}
				pos += frameLen
			}
		}
		return nil
	}}
}

// runScripted runs a driver into an ASR module with engine e and returns what the ASR
// sent and the network's error.
func runScripted(t *testing.T, cfg asr.Config, e asr.Engine, steps []step, virtual bool) ([]asrtest.Received, error) {
	t.Helper()
	return runDriver(t, cfg, e, driver(steps, virtual), virtual, nil)
}

// runDriver runs driver d into an ASR module with engine e, logging to log when it is
// not nil, and returns what the ASR sent and the network's error.
func runDriver(t *testing.T, cfg asr.Config, e asr.Engine, d iu.Module, virtual bool, log *zap.Logger) ([]asrtest.Received, error) {
	t.Helper()
	var opts []iu.Option
	if log != nil {
		opts = append(opts, iu.WithLogger(log))
	}
	if virtual {
		clk := clock.NewVirtual(asrtest.VirtualStart)
		defer clk.Close()
		opts = append(opts, iu.WithClock(clk))
	}
	net := iu.NewNetwork(opts...)
	m, err := asr.New("asr", cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	var got []asrtest.Received
	if err := net.Add(d, m, asrtest.Collector("sink", &got)); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(d, m); err != nil {
		t.Fatal(err)
	}
	if err := net.ConnectNames("asr", "sink"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return got, net.Run(ctx)
}

func scriptedConfig() asr.Config {
	c := asr.DefaultConfig()
	c.Hop = 100 * time.Millisecond
	return c
}

// TestModuleScripted drives the module with scripted hypotheses and checks the exact
// stream of word updates: local agreement holds words back until two hypotheses agree,
// a confirmed correction revokes the word it replaces, and the final decode decides.
func TestModuleScripted(t *testing.T) {
	turn := []step{{frames: 20}, {onset: true}, {frames: 40}, {eot: true}, {frames: 20}}
	tests := []struct {
		name     string
		partials []string
		final    string
		unstable bool
		want     []string
	}{
		{
			name:     "growth",
			partials: []string{"go", "go forward", "go forward ten", "go forward ten meters"},
			final:    "go forward ten meters",
			want: []string{"add go", "add forward", "add ten", "add meters",
				"commit go", "commit forward", "commit ten", "commit meters", "utterance go forward ten meters"},
		},
		{
			name:     "flicker is held back",
			partials: []string{"a", "a b", "a x", "a b", "a x", "a b c", "a b c"},
			final:    "a b c",
			want:     []string{"add a", "add b", "add c", "commit a", "commit b", "commit c", "utterance a b c"},
		},
		{
			name:     "confirmed correction revokes",
			partials: []string{"a", "a b", "a b", "a c d", "a c d"},
			final:    "a c d",
			want:     []string{"add a", "add b", "revoke b", "add c", "add d", "commit a", "commit c", "commit d", "utterance a c d"},
		},
		{
			name:     "the final decode overrules the partials",
			partials: []string{"ice", "ice cream", "ice cream"},
			final:    "i scream now",
			want:     []string{"add ice", "add cream", "revoke cream", "revoke ice", "add i", "add scream", "add now", "commit i", "commit scream", "commit now", "utterance i scream now"},
		},
		{
			name:     "nothing recognised",
			partials: []string{""},
			final:    "",
			want:     []string{"utterance "},
		},
		{
			name:     "unstable words flicker when asked for",
			partials: []string{"a", "a x", "a b", "a b"},
			final:    "a b",
			unstable: true,
			want: []string{"add a", "update a", "add x", "revoke x", "add b", "update b",
				"commit a", "commit b", "utterance a b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := scriptedConfig()
			cfg.EmitUnstable = tc.unstable
			e := &scripted{partials: tc.partials, final: tc.final}
			got, err := runScripted(t, cfg, e, turn, true)
			if err != nil {
				t.Fatal(err)
			}
			asrtest.Contract(t, got)
			if tr := asrtest.Trace(got); !slices.Equal(tr, tc.want) {
				t.Fatalf("updates\n%q\nwant\n%q\nengine calls %q", tr, tc.want, e.calls())
			}
		})
	}
}

func TestModuleUtteranceTiming(t *testing.T) {
	cfg := scriptedConfig()
	e := &scripted{partials: []string{"hello", "hello world"}, final: "hello world"}
	// 400 ms of silence, the onset, 1 s of speech, the end of turn, 400 ms more.
	got, err := runScripted(t, cfg, e, []step{{frames: 20}, {onset: true}, {frames: 50}, {eot: true}, {frames: 20}}, true)
	if err != nil {
		t.Fatal(err)
	}
	utts := asrtest.Contract(t, got)
	if len(utts) != 1 {
		t.Fatalf("%d utterances", len(utts))
	}
	u := utts[0]
	// The utterance's audio starts PreRoll before the onset and ends at least Trailing
	// after the speech (the driver's speech ends 500 ms before its end of turn), at
	// most where the end of turn came (audio fed for partials is not taken back).
	onset, speechEnd, eot := 400*time.Millisecond, 900*time.Millisecond, 1400*time.Millisecond
	if u.AudioStart != onset-cfg.PreRoll || u.AudioEnd < speechEnd+cfg.Trailing || u.AudioEnd > eot {
		t.Errorf("audio %v–%v, want from %v to between %v and %v", u.AudioStart, u.AudioEnd, onset-cfg.PreRoll, speechEnd+cfg.Trailing, eot)
	}
	if u.Start != onset || u.End != speechEnd {
		t.Errorf("speech %v–%v, want %v–%v", u.Start, u.End, onset, speechEnd)
	}
	fed := audio.DurationToSamples(u.AudioEnd-u.AudioStart, audio.PipelineRate)
	if calls := e.calls(); calls[len(calls)-1] != fmt.Sprintf("final %d", fed) {
		t.Errorf("engine calls %q; the final decode should have seen %d samples", calls, fed)
	}
	// Word times are stream times: the engine's offsets plus the audio start.
	if w := u.Words[1]; w.Start != u.AudioStart+100*time.Millisecond || w.Confidence != 0.5 || w.Stability != 1 {
		t.Errorf("second word %+v", w)
	}
	// Words are reported while the user speaks, long before the end of turn.
	for _, r := range got {
		if r.Up.Type == iu.Add && r.Up.IU.Payload.Kind() == "word" && r.At > onset+300*time.Millisecond {
			t.Errorf("word %s added at %v", r.Up.IU.Payload.Summary(), r.At)
		}
	}
}

func TestModuleTwoTurns(t *testing.T) {
	e := &scripted{partials: []string{"yes", "yes"}, final: "yes"}
	steps := []step{{frames: 10}, {onset: true}, {frames: 30}, {eot: true}, {frames: 10}, {onset: true}, {frames: 30}, {eot: true}, {frames: 5}}
	got, err := runScripted(t, scriptedConfig(), e, steps, true)
	if err != nil {
		t.Fatal(err)
	}
	utts := asrtest.Contract(t, got)
	if len(utts) != 2 || utts[0].ID != 1 || utts[1].ID != 2 || utts[0].Text != "yes" || utts[1].Text != "yes" {
		t.Fatalf("utterances %+v", utts)
	}
	// The second utterance's pre-roll never reaches back into the first one's audio.
	if utts[1].AudioStart < utts[0].AudioEnd {
		t.Errorf("utterance 2 audio starts at %v, before utterance 1's ends at %v", utts[1].AudioStart, utts[0].AudioEnd)
	}
	starts := 0
	for _, c := range e.calls() {
		if c == "start" {
			starts++
		}
	}
	if starts != 2 {
		t.Errorf("engine calls %q", e.calls())
	}
}

// TestModuleEndOfTurnCancelsPartial runs on the real clock with an engine whose partial
// decode never finishes by itself: the end of turn must cancel it and run the final
// decode, and audio keeps flowing in meanwhile.
func TestModuleEndOfTurnCancelsPartial(t *testing.T) {
	blocked := make(chan struct{})
	e := &scripted{block: true, blocked: blocked, final: "done"}
	// The end of turn comes once the partial decode blocks (partial jobs see a
	// cancellation between the pieces they feed, too, and then never call Partial).
	got, err := runScripted(t, scriptedConfig(), e, []step{{frames: 5}, {onset: true}, {frames: 40}, {wait: blocked, eot: true}, {frames: 5}}, false)
	if err != nil {
		t.Fatal(err)
	}
	utts := asrtest.Contract(t, got)
	if len(utts) != 1 || utts[0].Text != "done" {
		t.Fatalf("utterances %+v", utts)
	}
	calls := e.calls()
	if !slices.Contains(calls, "partial cancelled") || !strings.HasPrefix(calls[len(calls)-1], "final") {
		t.Fatalf("engine calls %q", calls)
	}
}

// TestModuleEndOfTurnCancelsFeed: a partial job cancelled between the pieces it feeds
// leaves the rest of its audio to the final decode, which still sees all the audio.
func TestModuleEndOfTurnCancelsFeed(t *testing.T) {
	blocked := make(chan struct{})
	e := &scripted{partials: []string{"x"}, final: "done", feedBlocked: blocked}
	cfg := scriptedConfig()
	cfg.Hop = 300 * time.Millisecond // three pieces per partial job
	got, err := runScripted(t, cfg, e, []step{{frames: 5}, {onset: true}, {frames: 40}, {wait: blocked, eot: true}, {frames: 5}}, false)
	if err != nil {
		t.Fatal(err)
	}
	utts := asrtest.Contract(t, got)
	if len(utts) != 1 || utts[0].Text != "done" {
		t.Fatalf("utterances %+v", utts)
	}
	fed := audio.DurationToSamples(utts[0].AudioEnd-utts[0].AudioStart, audio.PipelineRate)
	calls := e.calls()
	if !slices.Contains(calls, "feed cancelled") || calls[len(calls)-1] != fmt.Sprintf("final %d", fed) {
		t.Fatalf("engine calls %q; the final decode should have seen %d samples", calls, fed)
	}
}

func TestModuleInputEndsMidTurn(t *testing.T) {
	e := &scripted{partials: []string{"half"}, final: "half done"}
	got, err := runScripted(t, scriptedConfig(), e, []step{{frames: 5}, {onset: true}, {frames: 30}}, true)
	if err != nil {
		t.Fatal(err)
	}
	utts := asrtest.Contract(t, got)
	if len(utts) != 1 || utts[0].Text != "half done" {
		t.Fatalf("utterances %+v", utts)
	}
}

func TestModuleEngineErrors(t *testing.T) {
	for _, at := range []string{"partial", "final"} {
		e := &scripted{partials: []string{"x"}, final: "x", failAt: at}
		_, err := runScripted(t, scriptedConfig(), e, []step{{frames: 5}, {onset: true}, {frames: 30}, {eot: true}}, true)
		if err == nil || !strings.Contains(err.Error(), "engine broke") {
			t.Errorf("failing %s: network error %v", at, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := asr.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*asr.Config){
		"negative hop":      func(c *asr.Config) { c.Hop = -time.Millisecond },
		"zero agreement":    func(c *asr.Config) { c.Agreement = 0 },
		"negative pre-roll": func(c *asr.Config) { c.PreRoll = -1 },
		"short history":     func(c *asr.Config) { c.History = c.PreRoll },
	} {
		c := asr.DefaultConfig()
		mod(&c)
		if c.Validate() == nil {
			t.Errorf("%s accepted", name)
		}
		if _, err := asr.New("asr", c, &scripted{}); err == nil {
			t.Errorf("%s: New accepted", name)
		}
	}
	if _, err := asr.New("asr", asr.DefaultConfig(), nil); err == nil {
		t.Error("New without an engine succeeded")
	}
}
