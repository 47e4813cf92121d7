package speaker

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
)

func duck(db float64) func(*iu.Ports, map[string]iu.IU) []iu.Update {
	return func(p *iu.Ports, _ map[string]iu.IU) []iu.Update {
		u := p.NewIU(control.Command{Action: control.Duck, TurnID: 1, Gain: db})
		return []iu.Update{iu.AddOf(u), iu.CommitOf(u)}
	}
}

// level is a reference model of the renderer's level: changes at device frames, each a
// linear ramp of n frames from the level reached to the new one.
type level struct {
	n       int64
	changes []gainChange
}

func (l *level) set(frame int64, to float32) {
	from := l.at(frame - 1)
	l.changes = append(l.changes, gainChange{frame: frame, from: from, to: to, frames: l.n})
}

func (l *level) at(f int64) float32 {
	g := float32(1)
	for _, c := range l.changes {
		if c.frame <= f {
			g = c.at(f)
		}
	}
	return g
}

// TestFileSpeakerDuck: ducking scales the output, ramped, from the frame the command
// reached the renderer; pausing, resuming and interrupting while ducked move exactly the
// positions they move at full volume; the interrupt ends the ducking; and every report
// says the level the output really had at the sample it says was heard last.
func TestFileSpeakerDuck(t *testing.T) {
	a := testAudio{name: "a", f: signal(1, ms(500), 16000), turn: 1}
	b := testAudio{name: "b", f: signal(2, ms(100), 16000), turn: 2}
	const db = -12.0
	g := float32(math.Pow(10, db/20))
	for _, lat := range []time.Duration{0, 30 * time.Millisecond} {
		t.Run(fmt.Sprintf("latency %v", lat), func(t *testing.T) {
			events := []event{
				{at: 100 * time.Millisecond, do: add(a, true)},
				{at: 200 * time.Millisecond, do: duck(db)},
				{at: 300 * time.Millisecond, do: cmd(control.Pause, 1)},
				{at: 350 * time.Millisecond, do: cmd(control.Resume, 1)},
				{at: 450 * time.Millisecond, do: cmd(control.Unduck, 1)},
				{at: 500 * time.Millisecond, do: duck(db)},
				{at: 540 * time.Millisecond, do: cmd(control.Interrupt, 1)},
				{at: 700 * time.Millisecond, do: add(b, true)},
			}
			cfg := FileConfig{OutputLatency: lat}
			cfg.DuckRamp = 15 * time.Millisecond
			reports, out := runFile(t, cfg, events, time.Second)
			l := int(audio.DurationToSamples(lat, 16000))

			ref := &level{n: int64(ms(15))}
			ref.set(int64(ms(200)), g)
			ref.set(int64(ms(450)), 1)
			ref.set(int64(ms(500)), g)
			ref.set(int64(ms(540)), 1) // the interrupt
			// Positions as without ducking: a plays 100–300 ms and 350–540 ms (cut by the
			// interrupt after 390 ms of it), b from 700 ms at full volume.
			want := make([]float32, len(out.Samples))
			place := func(at int, f audio.Frame, from, count int) {
				for i := 0; i < count; i++ {
					frame := at + i
					want[l+frame] = f.Samples[from+i] * ref.at(int64(frame))
				}
			}
			place(ms(100), a.f, 0, ms(200))
			place(ms(350), a.f, ms(200), ms(190))
			place(ms(700), b.f, 0, ms(100))
			if len(out.Samples) < l+ms(800) {
				t.Fatalf("output has %d samples", len(out.Samples))
			}
			for i := range out.Samples {
				if out.Samples[i] != want[i] {
					t.Fatalf("output sample %d (%.4f s) = %g, want %g", i, float64(i)/16000, out.Samples[i], want[i])
				}
			}
			// No click: the level never jumps by more than one ramp step per sample.
			step := (1 - float64(g)) / float64(ms(15))
			for f := int64(ms(100)); f < int64(ms(800)); f++ {
				if d := math.Abs(float64(ref.at(f) - ref.at(f-1))); d > step*1.0001 {
					t.Fatalf("level jumps by %g at frame %d (ramp step %g)", d, f, step)
				}
			}
			expectChanges(t, reports, durationChanges(lat))
			checkReportedLevels(t, reports, out)
		})
	}
}

// durationChanges are the state changes of TestFileSpeakerDuck: the same as without
// ducking.
func durationChanges(lat time.Duration) []string {
	want := []string{fmt.Sprintf("%v playing %q tts/1 160", at(110, lat), "playing")}
	if lat == 0 {
		want = append(want, fmt.Sprintf("%v paused %q tts/1 3200", at(300, 0), "pause turn 1"))
	} else {
		want = append(want,
			fmt.Sprintf("%v paused %q tts/1 3200 tail until %v", at(300, 0), "pause turn 1", at(300, lat)),
			fmt.Sprintf("%v paused %q tts/1 3200", at(300, lat), "tail ended"))
	}
	want = append(want, fmt.Sprintf("%v playing %q tts/1 3200", at(350, 0), "resume turn 1"))
	if lat == 0 {
		want = append(want, fmt.Sprintf("%v stopped %q tts/1 6240", at(540, 0), "interrupt turn 1"))
	} else {
		want = append(want,
			fmt.Sprintf("%v stopped %q tts/1 6240 tail until %v", at(540, 0), "interrupt turn 1", at(540, lat)),
			fmt.Sprintf("%v stopped %q tts/1 6240", at(540, lat), "tail ended"))
	}
	return append(want,
		fmt.Sprintf("%v playing %q tts/8 160", at(710, lat), "playing"),
		fmt.Sprintf("%v idle %q tts/8 1600", at(800, lat), "finished"))
}

// checkReportedLevels checks each report that says which sample was heard last against
// the output: the output's sample there, divided by the input's, is the level the report
// gives.
func checkReportedLevels(t *testing.T, reports []timedReport, out audio.Frame) {
	t.Helper()
	checked, ducked := 0, 0
	for _, r := range reports {
		if r.p.Heard == "" || r.p.Offset == 0 || r.p.State != Playing || r.p.Reason != "" {
			continue
		}
		a := r.p.Item.(testAudio)
		x := int(audio.DurationToSamples(r.p.Pos, 16000)) - 1
		in := a.f.Samples[r.p.Offset-1]
		if out.Samples[x] == 0 {
			continue // the report came before the resumed audio reached the listener
		}
		got := 20 * math.Log10(float64(out.Samples[x]/in))
		if math.Abs(got-r.p.Gain) > 1e-3 {
			t.Fatalf("report at %v says %s heard at %.3f dB, the output has it at %.3f dB", r.at, a.name, r.p.Gain, got)
		}
		checked++
		if r.p.Gain < -11.99 {
			ducked++
		}
	}
	if checked == 0 || ducked == 0 {
		t.Fatalf("%d reports checked, %d of them ducked: the test checks nothing", checked, ducked)
	}
}
