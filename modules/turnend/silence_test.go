package turnend_test

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/turnend"
	"github.com/parley-voice/parley/modules/vad"
)

// window is the scripted scorer's window, Silero's: 32 ms.
const window = 512

// scriptScorer gives the VAD scripted speech probabilities, one per window.
type scriptScorer struct {
	probs   []float32
	next    int
	pending int
}

func (s *scriptScorer) WindowSize() int { return window }

func (s *scriptScorer) prob() float32 {
	p := float32(0)
	if s.next < len(s.probs) {
		p = s.probs[s.next]
	}
	s.next++
	return p
}

func (s *scriptScorer) Probs(chunk []float32) ([]float32, error) {
	s.pending += len(chunk)
	var out []float32
	for ; s.pending >= window; s.pending -= window {
		out = append(out, s.prob())
	}
	return out, nil
}

func (s *scriptScorer) Flush() ([]float32, error) {
	if s.pending == 0 {
		return nil, nil
	}
	s.pending = 0
	return []float32{s.prob()}, nil
}

func (s *scriptScorer) Reset() { s.next, s.pending = 0, 0 }

// windows expands (probability, count) pairs into a window sequence.
func windows(pairs ...float64) []float32 {
	var out []float32
	for i := 0; i+1 < len(pairs); i += 2 {
		for range int(pairs[i+1]) {
			out = append(out, float32(pairs[i]))
		}
	}
	return out
}

// silenceRun is what a run of the VAD and the silence policy sent.
type silenceRun struct {
	ends     []iu.IU // the ends of turn
	segments int     // committed segments
	origin   time.Time
}

// runSilence plays the scripted windows (as 20 ms frames, each when its last sample
// would be spoken) through the VAD and the turn-end module with the silence policy at
// the VAD's end_of_turn, on a virtual clock.
func runSilence(t *testing.T, probs []float32) silenceRun {
	t.Helper()
	return runTurnEnd(t, probs, turnend.Waits{}, nil)
}

// runTurnEnd is runSilence with waits, and with a manager that sends cmd's command (if
// cmd is not nil) cmd.at after the stream's start.
func runTurnEnd(t *testing.T, probs []float32, waits turnend.Waits, cmd *timedCommand) silenceRun {
	t.Helper()
	origin := time.Unix(1000, 0)
	clk := clock.NewVirtual(origin)
	defer clk.Close()
	cfg := vad.DefaultConfig()
	v, err := vad.New("vad", cfg, &scriptScorer{probs: probs})
	if err != nil {
		t.Fatal(err)
	}
	const frame = 320
	total := len(probs) * window
	input := iu.ModuleFunc{ModuleName: "input", Fn: func(ctx context.Context, p *iu.Ports) error {
		for start := 0; start < total; start += frame {
			n := min(frame, total-start)
			for {
				ev, err := p.Next(ctx, origin.Add(audio.SamplesToDuration(int64(start+n), audio.PipelineRate)))
				if err != nil {
					return err
				}
				if ev.Kind == iu.EventDeadline {
					break
				}
			}
			u := p.NewIU(audio.Frame{Rate: audio.PipelineRate, Channels: 1, Start: int64(start), Samples: make([]float32, n)})
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
		}
		u := p.NewIU(audio.EndOfStream{Pos: int64(total), Rate: audio.PipelineRate})
		return p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
	}}
	te := turnend.New("turn-end", turnend.Silence{After: v.HeardSilence(cfg.EndOfTurn)}, waits)
	run := silenceRun{origin: origin}
	sink := iu.ModuleFunc{ModuleName: "sink", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil || ev.Kind == iu.EventInputDone {
				return err
			}
			for _, up := range ev.Message.Updates {
				switch up.IU.Payload.(type) {
				case vad.EndOfTurn:
					if up.Type == iu.Add {
						run.ends = append(run.ends, up.IU)
					}
				case vad.Segment:
					if up.Type == iu.Commit {
						run.segments++
					}
				}
			}
		}
	}}
	manager := iu.ModuleFunc{ModuleName: "manager", Fn: func(ctx context.Context, p *iu.Ports) error {
		if cmd == nil {
			return nil
		}
		if _, err := p.Next(ctx, origin.Add(cmd.at)); err != nil {
			return err
		}
		u := p.NewIU(cmd.cmd)
		return p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
	}}
	net := iu.NewNetwork(iu.WithClock(clk))
	if err := net.Add(input, v, te, manager, sink); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"input", "vad"}, {"vad", "sink"}, {"input", "turn-end"}, {"vad", "turn-end"}, {"manager", "turn-end"}, {"turn-end", "sink"}} {
		if err := net.ConnectNames(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestSilenceEndsTurnsWhereTheVADHearsIt: the silence policy at the VAD's end_of_turn
// ends a turn at the end of the frame that completes the VAD's window in which that much
// silence had followed the padded end, and it spans the turn's segments.
func TestSilenceEndsTurnsWhereTheVADHearsIt(t *testing.T) {
	cfg := vad.DefaultConfig()
	pad := audio.DurationToSamples(cfg.SpeechPad, audio.PipelineRate)
	run := runSilence(t, windows(0.0, 10, 0.9, 20, 0.0, 60))
	if len(run.ends) != 1 {
		t.Fatalf("%d ends of turn, want 1", len(run.ends))
	}
	eot := run.ends[0].Payload.(vad.EndOfTurn)
	dur := func(n int64) time.Duration { return audio.SamplesToDuration(n, audio.PipelineRate) }
	if eot.SpeechStart != dur(10*window-pad) || eot.SpeechEnd != dur(30*window+pad) {
		t.Errorf("turn %v–%v, want %v–%v", eot.SpeechStart, eot.SpeechEnd, dur(10*window-pad), dur(30*window+pad))
	}
	// 700 ms after the padded end is heard at the end of the 23rd window after the raw
	// end (window 53), which the frame ending at 1.7 s completes.
	if at := run.ends[0].Created.Sub(run.origin); at != 1700*time.Millisecond {
		t.Errorf("turn ended at %v, want 1.7s", at)
	}
	if eot.Silence < cfg.EndOfTurn {
		t.Errorf("silence %v, want at least %v", eot.Silence, cfg.EndOfTurn)
	}
}

// TestSilenceTurns: which pauses end a turn, with the VAD's default 700 ms end of turn.
func TestSilenceTurns(t *testing.T) {
	ms := func(d time.Duration) float64 { return float64(d / (32 * time.Millisecond)) }
	tests := []struct {
		name  string
		probs []float32
		turns int
		segs  int
	}{
		// Two segments 500 ms apart are one turn.
		{"pause shorter than end of turn", windows(0.0, 5, 0.9, 20, 0.0, ms(500*time.Millisecond), 0.9, 20, 0.0, 40), 1, 2},
		{"pause longer than end of turn", windows(0.0, 5, 0.9, 20, 0.0, ms(1200*time.Millisecond), 0.9, 20, 0.0, 40), 2, 2},
		// A blip during the end-of-turn silence holds the end of turn until it is known
		// to be noise, but does not start a new segment.
		{"blip delays but does not prevent the end of turn", windows(0.0, 5, 0.9, 20, 0.0, 18, 0.9, 5, 0.0, 40), 1, 1},
		{"input ends during speech", windows(0.0, 5, 0.9, 20), 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			run := runSilence(t, tc.probs)
			if len(run.ends) != tc.turns || run.segments != tc.segs {
				t.Fatalf("%d turns, %d segments; want %d, %d", len(run.ends), run.segments, tc.turns, tc.segs)
			}
		})
	}
}

// timedCommand is a control command the manager sends at a time.
type timedCommand struct {
	at  time.Duration
	cmd control.Command
}

// TestInterruptionFloor: a voice that stopped the agent holds its turn for
// after_interruption while it is short; one that stopped a reply in its first moments
// is the user's turn going on (control.Command.UserKeptTurn), which ends by the policy.
func TestInterruptionFloor(t *testing.T) {
	waits := turnend.Waits{AfterInterruption: 2 * time.Second}
	probs := windows(0.0, 10, 0.9, 20, 0.0, 100)
	for _, tc := range []struct {
		name string
		kept bool
		want time.Duration // the least silence the turn ended after
	}{
		{"the user took the turn", false, waits.AfterInterruption},
		{"the user kept the turn", true, vad.DefaultConfig().EndOfTurn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := &timedCommand{at: 600 * time.Millisecond, cmd: control.Command{Action: control.Interrupt, TurnID: 2, UserKeptTurn: tc.kept}}
			run := runTurnEnd(t, probs, waits, cmd)
			if len(run.ends) != 1 {
				t.Fatalf("%d ends of turn, want 1", len(run.ends))
			}
			silence := run.ends[0].Payload.(vad.EndOfTurn).Silence
			if silence < tc.want || silence > tc.want+100*time.Millisecond {
				t.Errorf("the turn ended after %v of silence, want %v (at most 100 ms more)", silence, tc.want)
			}
		})
	}
}
