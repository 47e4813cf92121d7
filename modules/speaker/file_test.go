package speaker

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap/zaptest"
)

// testAudio is agent audio with a turn, like tts.Chunk.
type testAudio struct {
	name      string
	f         audio.Frame
	turn      int
	tentative bool
}

func (a testAudio) Kind() string      { return "speech" }
func (a testAudio) Summary() string   { return a.name }
func (a testAudio) PCM() audio.Frame  { return a.f }
func (a testAudio) AgentTurn() int    { return a.turn }
func (a testAudio) IsTentative() bool { return a.tentative }
func (a testAudio) String() string    { return a.name }

// HeardAt makes testAudio a Speech payload: its "text" is its name, and the position
// the offset itself, so that reports show exactly what they were asked for.
func (a testAudio) HeardAt(offset int) dialogue.Position {
	return dialogue.Position{TurnID: a.turn, Clause: a.name, WordStart: offset, WordEnd: offset, WordFraction: float64(offset) / float64(a.f.Len())}
}

// signal returns n samples at rate whose values are unique to (id, index), so that a
// sample found in the output says exactly which item and sample it came from.
func signal(id, n, rate int) audio.Frame {
	f := audio.Frame{Rate: rate, Channels: 1, Samples: make([]float32, n)}
	for i := range f.Samples {
		f.Samples[i] = float32(id)*0.01 + float32(i+1)*1e-6
	}
	return f
}

// event is something the test's producer does at a time on the virtual clock.
type event struct {
	at time.Duration
	do func(p *iu.Ports, ius map[string]iu.IU) []iu.Update
}

func add(a testAudio, commit bool) func(*iu.Ports, map[string]iu.IU) []iu.Update {
	return func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
		u := p.NewIU(a)
		ius[a.name] = u
		if commit {
			return []iu.Update{iu.AddOf(u), iu.CommitOf(u)}
		}
		return []iu.Update{iu.AddOf(u)}
	}
}

func revoke(name string) func(*iu.Ports, map[string]iu.IU) []iu.Update {
	return func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
		return []iu.Update{iu.RevokeOf(ius[name])}
	}
}

func cmd(a control.Action, turn int) func(*iu.Ports, map[string]iu.IU) []iu.Update {
	return func(p *iu.Ports, _ map[string]iu.IU) []iu.Update {
		u := p.NewIU(control.Command{Action: a, TurnID: turn})
		return []iu.Update{iu.AddOf(u), iu.CommitOf(u)}
	}
}

// producer plays the events in order at their times, then ends its output at end.
func producer(events []event, end time.Duration) iu.Module {
	return iu.ModuleFunc{ModuleName: "tts", Fn: func(ctx context.Context, p *iu.Ports) error {
		start := p.Now()
		ius := map[string]iu.IU{}
		wait := func(at time.Duration) error {
			for p.Now().Before(start.Add(at)) {
				if _, err := p.Next(ctx, start.Add(at)); err != nil {
					return err
				}
			}
			return nil
		}
		for _, ev := range events {
			if err := wait(ev.at); err != nil {
				return err
			}
			if err := p.Send(ctx, ev.do(p, ius)...); err != nil {
				return err
			}
		}
		return wait(end)
	}}
}

// timedReport is a progress report and when it was sent (since the start).
type timedReport struct {
	at time.Duration
	p  Progress
}

type recorder struct {
	start time.Time
	mu    sync.Mutex
	got   []timedReport
}

func (r *recorder) Observe(at time.Time, m iu.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, up := range m.Updates {
		if pr, ok := up.IU.Payload.(Progress); ok && up.Type == iu.Add {
			if pr.Heard != "" && (len(up.IU.GroundedIn) != 1 || up.IU.GroundedIn[0] != pr.Heard) {
				panic(fmt.Sprintf("progress %v grounded in %v, not in %s", pr, up.IU.GroundedIn, pr.Heard))
			}
			// The report says where in its text the listener is: the Speech payload's own
			// answer for the samples heard.
			if sp, ok := pr.Item.(Speech); ok && (pr.Text == nil || *pr.Text != sp.HeardAt(pr.Offset)) {
				panic(fmt.Sprintf("progress %v reports text %+v, its item says %+v", pr, pr.Text, sp.HeardAt(pr.Offset)))
			} else if !ok && pr.Text != nil {
				panic(fmt.Sprintf("progress %v reports text %+v for audio without text", pr, pr.Text))
			}
			r.got = append(r.got, timedReport{at.Sub(r.start), pr})
		}
	}
}

// runFile runs the producer's events through a file speaker on a virtual clock and
// returns the progress reports and the output file's samples.
func runFile(t *testing.T, cfg FileConfig, events []event, end time.Duration) ([]timedReport, audio.Frame) {
	t.Helper()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	v := clock.NewVirtual(start)
	defer v.Close()
	cfg.Path = filepath.Join(t.TempDir(), "heard.wav")
	cfg.Bits = 32 // float: the output's samples compare exactly with the input's
	sp, err := NewFile("speaker", cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{start: start}
	net := iu.NewNetwork(iu.WithClock(v), iu.WithObserver(rec), iu.WithLogger(zaptest.NewLogger(t)))
	prod := producer(events, end)
	if err := net.Add(prod, sp); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(prod, sp); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := audio.DecodeWAVFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	return rec.got, out
}

// ms converts milliseconds to samples at 16 kHz.
func ms(n int) int { return n * 16 }

// expectOutput checks the output against pieces placed at times; everything else must
// be silence.
type piece struct {
	at    int // output sample where it starts
	f     audio.Frame
	from  int // first sample of f
	count int // -1: to the end
}

func expectOutput(t *testing.T, out audio.Frame, minLen int, pieces ...piece) {
	t.Helper()
	want := make([]float32, max(len(out.Samples), minLen))
	for _, pc := range pieces {
		n := pc.count
		if n < 0 {
			n = len(pc.f.Samples) - pc.from
		}
		copy(want[pc.at:], pc.f.Samples[pc.from:pc.from+n])
	}
	if len(out.Samples) < minLen {
		t.Fatalf("output has %d samples, want at least %d", len(out.Samples), minLen)
	}
	for i := range out.Samples {
		if out.Samples[i] != want[i] {
			t.Fatalf("output sample %d (%.4f s) = %g, want %g", i, float64(i)/16000, out.Samples[i], want[i])
		}
	}
}

// checkReportsAgainstOutput checks the reports that describe audio heard right up to
// their Pos (steady reports while playing, and pauses and stops whose tail ends at Pos)
// against the output: the sample just before Pos must be the last one they say was heard.
func checkReportsAgainstOutput(t *testing.T, reports []timedReport, out audio.Frame) {
	t.Helper()
	var prev Progress
	for _, r := range reports {
		advanced := r.p.Heard != prev.Heard || r.p.Offset != prev.Offset
		prev = r.p
		if r.p.Heard == "" || r.p.Offset == 0 {
			continue
		}
		// A steady report right after a resume may come before the resumed audio
		// reaches the listener (the output latency): nothing new was heard then.
		if !(r.p.State == Playing && r.p.Reason == "" && advanced) && !r.p.Tail {
			continue
		}
		a := r.p.Item.(testAudio)
		x := int(audio.DurationToSamples(r.p.Pos, 16000)) - 1
		if x < 0 || x >= len(out.Samples) {
			t.Fatalf("report %+v: position outside the output", r.p)
		}
		if got, want := out.Samples[x], a.f.Samples[r.p.Offset-1]; got != want {
			t.Fatalf("report at %v says %s heard to sample %d at %v, but the output holds %g there, not %g",
				r.at, a.name, r.p.Offset, r.p.Pos, got, want)
		}
	}
}

func TestFileSpeakerPlaysOnTimeline(t *testing.T) {
	a := testAudio{name: "a", f: signal(1, ms(200), 16000), turn: 1}
	b := testAudio{name: "b", f: signal(2, ms(100), 16000), turn: 1}
	c := testAudio{name: "c", f: signal(3, ms(100), 16000), turn: 2}
	for _, lat := range []time.Duration{0, 30 * time.Millisecond} {
		t.Run(fmt.Sprintf("latency %v", lat), func(t *testing.T) {
			events := []event{
				{at: 100 * time.Millisecond, do: add(a, true)},
				{at: 100 * time.Millisecond, do: add(b, true)},
				{at: 600 * time.Millisecond, do: add(c, true)},
			}
			reports, out := runFile(t, FileConfig{OutputLatency: lat}, events, time.Second)
			l := int(audio.DurationToSamples(lat, 16000))
			expectOutput(t, out, ms(1000),
				piece{at: l + ms(100), f: a.f, count: -1},
				piece{at: l + ms(300), f: b.f, count: -1},
				piece{at: l + ms(600), f: c.f, count: -1})
			checkReportsAgainstOutput(t, reports, out)
			// Steady reports while playing: every 20 ms, exact positions.
			for _, r := range reports {
				if r.p.State != Playing || r.p.Reason != "" {
					continue
				}
				if r.at%(20*time.Millisecond) != 0 {
					t.Fatalf("steady report off the 20 ms grid at %v", r.at)
				}
				if r.p.Pos != r.at {
					t.Fatalf("steady report at %v has Pos %v", r.at, r.p.Pos)
				}
				if !r.p.Audible() {
					t.Fatalf("playing report not audible: %+v", r.p)
				}
			}
			// Audio starting to be heard is noticed at the next 10 ms step.
			want := []string{
				fmt.Sprintf("%v playing %q tts/1 160", 110*time.Millisecond+lat, "playing"),
				fmt.Sprintf("%v idle %q tts/2 1600", 400*time.Millisecond+lat, "finished"),
				fmt.Sprintf("%v playing %q tts/3 160", 610*time.Millisecond+lat, "playing"),
				fmt.Sprintf("%v idle %q tts/3 1600", 700*time.Millisecond+lat, "finished"),
			}
			expectChanges(t, reports, want)
		})
	}
}

// changes lists the reports that carry a reason (state changes and tail ends).
func changes(reports []timedReport) []string {
	var out []string
	for _, r := range reports {
		if r.p.Reason == "" {
			continue
		}
		s := fmt.Sprintf("%v %s %q %s %d", r.at, r.p.State, r.p.Reason, r.p.Heard, r.p.Offset)
		if r.p.Tail {
			s += fmt.Sprintf(" tail until %v", r.p.Pos)
		} else if r.p.Pos != r.at {
			s += fmt.Sprintf(" pos %v", r.p.Pos)
		}
		out = append(out, s)
	}
	return out
}

func expectChanges(t *testing.T, reports []timedReport, want []string) {
	t.Helper()
	got := changes(reports)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("state changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func at(ms int, lat time.Duration) time.Duration { return time.Duration(ms)*time.Millisecond + lat }

func TestFileSpeakerPauseResume(t *testing.T) {
	a := testAudio{name: "a", f: signal(1, ms(500), 16000), turn: 1}
	for _, lat := range []time.Duration{0, 30 * time.Millisecond} {
		t.Run(fmt.Sprintf("latency %v", lat), func(t *testing.T) {
			events := []event{
				{at: 100 * time.Millisecond, do: add(a, true)},
				{at: 200 * time.Millisecond, do: cmd(control.Pause, 1)},
				{at: 500 * time.Millisecond, do: cmd(control.Resume, 1)},
			}
			reports, out := runFile(t, FileConfig{OutputLatency: lat}, events, time.Second)
			l := int(audio.DurationToSamples(lat, 16000))
			// The pause holds the output at 200 ms; the resume continues with the very
			// next sample at 500 ms.
			expectOutput(t, out, ms(900),
				piece{at: l + ms(100), f: a.f, count: ms(100)},
				piece{at: l + ms(500), f: a.f, from: ms(100), count: -1})
			checkReportsAgainstOutput(t, reports, out)
			want := []string{fmt.Sprintf("%v playing %q tts/1 160", at(110, lat), "playing")}
			if lat == 0 {
				want = append(want, fmt.Sprintf("%v paused %q tts/1 1600", at(200, 0), "pause turn 1"))
			} else {
				want = append(want,
					fmt.Sprintf("%v paused %q tts/1 1600 tail until %v", at(200, 0), "pause turn 1", at(200, lat)),
					fmt.Sprintf("%v paused %q tts/1 1600", at(200, lat), "tail ended"))
			}
			want = append(want,
				fmt.Sprintf("%v playing %q tts/1 1600", at(500, 0), "resume turn 1"),
				fmt.Sprintf("%v idle %q tts/1 8000", at(900, lat), "finished"))
			expectChanges(t, reports, want)
			for _, r := range reports {
				if r.p.State == Paused && r.p.Audible() != r.p.Tail {
					t.Fatalf("paused report audible %v with tail %v", r.p.Audible(), r.p.Tail)
				}
			}
		})
	}
}

func TestFileSpeakerInterrupt(t *testing.T) {
	c1 := testAudio{name: "c1", f: signal(1, ms(100), 16000), turn: 1}
	c2 := testAudio{name: "c2", f: signal(2, ms(100), 16000), turn: 1}
	c3 := testAudio{name: "c3", f: signal(3, ms(100), 16000), turn: 1}
	late := testAudio{name: "late", f: signal(4, ms(100), 16000), turn: 1}
	d1 := testAudio{name: "d1", f: signal(5, ms(100), 16000), turn: 2}
	tests := []struct {
		name   string
		lat    time.Duration
		pause  bool
		output []piece
		want   []string
	}{
		{
			name:   "while playing",
			output: []piece{{at: ms(100), f: c1.f, count: -1}, {at: ms(200), f: c2.f, count: ms(50)}, {at: ms(400), f: d1.f, count: -1}},
			want: []string{
				`110ms playing "playing" tts/1 160`,
				`250ms stopped "interrupt turn 1" tts/2 800`,
				`410ms playing "playing" tts/6 160`,
				`500ms idle "finished" tts/6 1600`,
			},
		},
		{
			name: "while playing with latency",
			lat:  30 * time.Millisecond,
			output: []piece{{at: ms(130), f: c1.f, count: -1}, {at: ms(230), f: c2.f, count: ms(50)},
				{at: ms(430), f: d1.f, count: -1}},
			want: []string{
				`140ms playing "playing" tts/1 160`,
				`250ms stopped "interrupt turn 1" tts/2 800 tail until 280ms`,
				`280ms stopped "tail ended" tts/2 800`,
				`440ms playing "playing" tts/6 160`,
				`530ms idle "finished" tts/6 1600`,
			},
		},
		{
			name:   "while paused",
			pause:  true,
			output: []piece{{at: ms(100), f: c1.f, count: ms(50)}, {at: ms(400), f: d1.f, count: -1}},
			want: []string{
				`110ms playing "playing" tts/1 160`,
				`150ms paused "pause turn 1" tts/1 800`,
				`250ms stopped "interrupt turn 1" tts/1 800`,
				`410ms playing "playing" tts/7 160`,
				`500ms idle "finished" tts/7 1600`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := []event{
				{at: 100 * time.Millisecond, do: add(c1, true)},
				{at: 100 * time.Millisecond, do: add(c2, true)},
				{at: 100 * time.Millisecond, do: add(c3, true)},
			}
			if tt.pause {
				events = append(events, event{at: 150 * time.Millisecond, do: cmd(control.Pause, 1)})
			}
			events = append(events,
				event{at: 250 * time.Millisecond, do: cmd(control.Interrupt, 1)},
				event{at: 300 * time.Millisecond, do: add(late, true)}, // dropped: turn 1 was interrupted
				event{at: 400 * time.Millisecond, do: add(d1, true)},
			)
			reports, out := runFile(t, FileConfig{OutputLatency: tt.lat}, events, time.Second)
			expectOutput(t, out, ms(500), tt.output...)
			checkReportsAgainstOutput(t, reports, out)
			expectChanges(t, reports, tt.want)
		})
	}
}

func TestFileSpeakerRevoke(t *testing.T) {
	a := testAudio{name: "a", f: signal(1, ms(50), 16000), turn: 1}
	x := testAudio{name: "x", f: signal(2, ms(100), 16000), turn: 1}
	y := testAudio{name: "y", f: signal(3, ms(100), 16000), turn: 1}
	w := testAudio{name: "w", f: signal(4, ms(100), 16000), turn: 1}
	tests := []struct {
		name   string
		events []event
		output []piece
	}{
		{
			// x is already in the output's buffer when it is revoked: the buffer is cut
			// at x's start, and y follows a directly.
			name: "in the output buffer",
			events: []event{
				{at: 100 * time.Millisecond, do: add(a, true)},
				{at: 100 * time.Millisecond, do: add(x, false)},
				{at: 120 * time.Millisecond, do: revoke("x")},
				{at: 130 * time.Millisecond, do: add(y, true)},
				{at: 130 * time.Millisecond, do: add(w, false)},
				{at: 140 * time.Millisecond, do: revoke("w")}, // still queued
			},
			output: []piece{{at: ms(100), f: a.f, count: -1}, {at: ms(150), f: y.f, count: -1}},
		},
		{
			name: "already playing",
			events: []event{
				{at: 100 * time.Millisecond, do: add(a, true)},
				{at: 100 * time.Millisecond, do: add(x, false)},
				{at: 175 * time.Millisecond, do: revoke("x")},
			},
			output: []piece{{at: ms(100), f: a.f, count: -1}, {at: ms(150), f: x.f, count: -1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reports, out := runFile(t, FileConfig{}, tt.events, time.Second)
			expectOutput(t, out, ms(250), tt.output...)
			checkReportsAgainstOutput(t, reports, out)
		})
	}
}

// TestFileSpeakerResamples plays 22050 Hz audio into a 16 kHz file: the output is the
// resampled stream, and reported offsets count samples at the item's own rate.
func TestFileSpeakerResamples(t *testing.T) {
	const rate = 22050
	var parts []testAudio
	var all []float32
	for i := range 3 {
		p := testAudio{name: fmt.Sprint("p", i), turn: 1, f: audio.Frame{Rate: rate, Channels: 1, Samples: make([]float32, 882)}}
		for j := range p.f.Samples {
			n := len(all) + j
			p.f.Samples[j] = float32(0.5 * math.Sin(2*math.Pi*440*float64(n)/rate))
		}
		all = append(all, p.f.Samples...)
		parts = append(parts, p)
	}
	events := []event{}
	for _, p := range parts {
		events = append(events, event{at: 100 * time.Millisecond, do: add(p, true)})
	}
	reports, out := runFile(t, FileConfig{}, events, 400*time.Millisecond)
	want, err := audio.ResampleFrame(audio.Frame{Rate: rate, Channels: 1, Samples: all}, 16000)
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Samples) != 1920 {
		t.Fatalf("reference has %d samples", len(want.Samples))
	}
	for i, v := range out.Samples {
		w := float32(0)
		if j := i - ms(100); j >= 0 && j < len(want.Samples) {
			w = want.Samples[j]
		}
		if math.Abs(float64(v-w)) > 1e-6 {
			t.Fatalf("output sample %d = %g, want %g", i, v, w)
		}
	}
	// A steady report at t has heard (t-100 ms)·22050 input samples in all.
	index := map[iu.ID]int{"tts/1": 0, "tts/2": 1, "tts/3": 2}
	var steady int
	for _, r := range reports {
		if r.p.Heard == "" {
			continue
		}
		heard := index[r.p.Heard]*882 + r.p.Offset
		exact := float64(r.p.Pos-100*time.Millisecond) * rate / float64(time.Second)
		if r.p.State == Playing && math.Abs(float64(heard)-exact) > 1.5 {
			t.Fatalf("report at %v: %s offset %d is %d samples heard, want %.1f", r.at, r.p.Heard, r.p.Offset, heard, exact)
		}
		if r.p.State == Playing && r.p.Reason == "" {
			steady++
		}
		if r.p.State == Idle && (r.p.Heard != "tts/3" || r.p.Offset != 882 || !r.p.Finished()) {
			t.Fatalf("final report %+v", r.p)
		}
	}
	if steady < 4 {
		t.Fatalf("only %d steady reports", steady)
	}
}

// untagged is audio without a turn.
type untagged struct{ f audio.Frame }

func (u untagged) Kind() string     { return "audio" }
func (u untagged) Summary() string  { return "untagged" }
func (u untagged) PCM() audio.Frame { return u.f }

func addUntagged(a untagged) func(*iu.Ports, map[string]iu.IU) []iu.Update {
	return func(p *iu.Ports, _ map[string]iu.IU) []iu.Update {
		u := p.NewIU(a)
		return []iu.Update{iu.AddOf(u), iu.CommitOf(u)}
	}
}

func TestFileSpeakerInterruptEdgeCases(t *testing.T) {
	c1 := testAudio{name: "c1", f: signal(1, ms(100), 16000), turn: 1}
	d1 := testAudio{name: "d1", f: signal(2, ms(200), 16000), turn: 2}
	u1 := untagged{f: signal(3, ms(100), 16000)}
	tests := []struct {
		name   string
		events []event
		output []piece
		want   []string
	}{
		{
			name: "stale interrupt while a later turn plays",
			events: []event{
				{at: 100 * time.Millisecond, do: add(d1, true)},
				{at: 150 * time.Millisecond, do: cmd(control.Interrupt, 1)},
			},
			output: []piece{{at: ms(100), f: d1.f, count: -1}},
			want: []string{
				`110ms playing "playing" tts/1 160`,
				`150ms playing "interrupt turn 1: nothing of it playing" tts/1 800`,
				`300ms idle "finished" tts/1 3200`,
			},
		},
		{
			name: "interrupt after the turn was heard",
			events: []event{
				{at: 100 * time.Millisecond, do: add(c1, true)},
				{at: 300 * time.Millisecond, do: cmd(control.Interrupt, 1)},
			},
			output: []piece{{at: ms(100), f: c1.f, count: -1}},
			want: []string{
				`110ms playing "playing" tts/1 160`,
				`200ms idle "finished" tts/1 1600`,
				`300ms stopped "interrupt turn 1" tts/1 1600`,
			},
		},
		{
			name: "untagged audio is flushed by any interrupt, and accepted after it",
			events: []event{
				{at: 100 * time.Millisecond, do: addUntagged(u1)},
				{at: 150 * time.Millisecond, do: cmd(control.Interrupt, 7)},
				{at: 300 * time.Millisecond, do: addUntagged(u1)},
			},
			output: []piece{{at: ms(100), f: u1.f, count: ms(50)}, {at: ms(300), f: u1.f, count: -1}},
			want: []string{
				`110ms playing "playing" tts/1 160`,
				`150ms stopped "interrupt turn 7" tts/1 800`,
				`310ms playing "playing" tts/3 160`,
				`400ms idle "finished" tts/3 1600`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reports, out := runFile(t, FileConfig{}, tt.events, 500*time.Millisecond)
			expectOutput(t, out, ms(400), tt.output...)
			expectChanges(t, reports, tt.want)
		})
	}
}

// TestFileSpeakerUpdate replaces the payload of queued audio before it plays.
func TestFileSpeakerUpdate(t *testing.T) {
	a := testAudio{name: "a", f: signal(1, ms(100), 16000), turn: 1}
	b := testAudio{name: "b", f: signal(2, ms(300), 16000), turn: 1}
	b2 := testAudio{name: "b2", f: signal(3, ms(50), 16000), turn: 1}
	events := []event{
		{at: 100 * time.Millisecond, do: add(a, true)},
		{at: 100 * time.Millisecond, do: add(b, false)},
		{at: 110 * time.Millisecond, do: func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
			return []iu.Update{iu.UpdateOf(ius["b"], b2), iu.CommitOf(ius["b"])}
		}},
	}
	// b is in the output buffer by then (the lead is 100 ms), so the update cannot
	// reach it; with a lead of 10 ms it can.
	for _, tc := range []struct {
		lead time.Duration
		want audio.Frame
	}{{100 * time.Millisecond, b.f}, {10 * time.Millisecond, b2.f}} {
		t.Run(fmt.Sprint("lead ", tc.lead), func(t *testing.T) {
			_, out := runFile(t, FileConfig{Options: Options{Lead: tc.lead}}, events, 600*time.Millisecond)
			expectOutput(t, out, ms(600), piece{at: ms(100), f: a.f, count: -1}, piece{at: ms(200), f: tc.want, count: -1})
		})
	}
}

func addTentative(a testAudio) func(*iu.Ports, map[string]iu.IU) []iu.Update {
	return func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
		a.tentative = true
		u := p.NewIU(a)
		ius[a.name] = u
		return []iu.Update{iu.AddOf(u)}
	}
}

func commit(name string) func(*iu.Ports, map[string]iu.IU) []iu.Update {
	return func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
		return []iu.Update{iu.CommitOf(ius[name])}
	}
}

// TestFileSpeakerHoldsTentativeAudio: a reply prepared before the user's turn ended
// waits, unheard and unreported, until its IUs are committed, and then plays at once
// (with what was queued behind it); withdrawn, it is never heard.
func TestFileSpeakerHoldsTentativeAudio(t *testing.T) {
	x := testAudio{name: "x", f: signal(1, ms(100), 16000), turn: 2}
	y := testAudio{name: "y", f: signal(2, ms(100), 16000), turn: 2}
	z := testAudio{name: "z", f: signal(3, ms(50), 16000), turn: 3}
	t.Run("committed later", func(t *testing.T) {
		events := []event{
			{at: 100 * time.Millisecond, do: addTentative(x)},
			{at: 120 * time.Millisecond, do: addTentative(y)},
			{at: 400 * time.Millisecond, do: commit("x")},
			{at: 400 * time.Millisecond, do: commit("y")},
		}
		reports, out := runFile(t, FileConfig{}, events, time.Second)
		expectOutput(t, out, ms(700), piece{at: ms(400), f: x.f, count: -1}, piece{at: ms(500), f: y.f, count: -1})
		checkReportsAgainstOutput(t, reports, out)
		for _, r := range reports {
			if r.at < 400*time.Millisecond && r.p.State != Idle {
				t.Fatalf("report while the audio was held: %+v", r.p)
			}
		}
	})
	t.Run("withdrawn", func(t *testing.T) {
		events := []event{
			{at: 100 * time.Millisecond, do: addTentative(x)},
			{at: 120 * time.Millisecond, do: addTentative(y)},
			{at: 300 * time.Millisecond, do: revoke("x")},
			{at: 300 * time.Millisecond, do: revoke("y")},
			{at: 350 * time.Millisecond, do: add(z, true)},
		}
		reports, out := runFile(t, FileConfig{}, events, time.Second)
		expectOutput(t, out, ms(600), piece{at: ms(350), f: z.f, count: -1})
		for _, r := range reports {
			if r.p.Heard != "" && r.p.Item.(testAudio).turn == 2 {
				t.Fatalf("withdrawn audio was reported heard: %+v", r.p)
			}
		}
	})
}
