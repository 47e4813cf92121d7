package speaker

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap/zaptest"
)

// timedPlayed is a Played payload and when it was sent (since the start).
type timedPlayed struct {
	at time.Duration
	p  Played
}

type playedRecorder struct {
	recorder
	played []timedPlayed
}

func (r *playedRecorder) Observe(at time.Time, m iu.Message) {
	r.recorder.Observe(at, m)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, up := range m.Updates {
		if p, ok := up.IU.Payload.(Played); ok && up.Type == iu.Add {
			r.played = append(r.played, timedPlayed{at.Sub(r.start), p})
		}
	}
}

// runFileTapped is runFile with the played-audio tap on or off.
func runFileTapped(t *testing.T, cfg FileConfig, tapped bool, events []event, end time.Duration) ([]timedReport, []timedPlayed, audio.Frame) {
	t.Helper()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	v := clock.NewVirtual(start)
	defer v.Close()
	cfg.Path = filepath.Join(t.TempDir(), "heard.wav")
	cfg.Bits = 32
	cfg.Played = tapped
	sp, err := NewFile("speaker", cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := &playedRecorder{recorder: recorder{start: start}}
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
	return rec.got, rec.played, out
}

// TestFileSpeakerReportsPlayedAudio: with the tap on, the played IUs are the output
// sample for sample, silence included, from the first frame to the last, each stamped
// with when the listener hears it, and sent no later than the clock reaches the time it
// was played; the progress reports and the output are exactly those without the tap.
func TestFileSpeakerReportsPlayedAudio(t *testing.T) {
	a := testAudio{name: "a", f: signal(1, ms(300), 16000), turn: 1}
	b := testAudio{name: "b", f: signal(2, ms(200), 16000), turn: 1}
	c := testAudio{name: "c", f: signal(3, ms(100), 16000), turn: 2}
	events := []event{
		{at: 100 * time.Millisecond, do: add(a, true)},
		{at: 100 * time.Millisecond, do: add(b, true)},
		{at: 250 * time.Millisecond, do: cmd(control.Pause, 1)},
		{at: 400 * time.Millisecond, do: cmd(control.Resume, 1)},
		{at: 520 * time.Millisecond, do: cmd(control.Interrupt, 1)},
		{at: 700 * time.Millisecond, do: add(c, true)},
	}
	for _, lat := range []time.Duration{0, 30 * time.Millisecond} {
		t.Run(fmt.Sprintf("latency %v", lat), func(t *testing.T) {
			cfg := FileConfig{OutputLatency: lat}
			plainReports, _, plainOut := runFileTapped(t, cfg, false, events, 1200*time.Millisecond)
			reports, played, out := runFileTapped(t, cfg, true, events, 1200*time.Millisecond)
			if !reflect.DeepEqual(reports, plainReports) {
				t.Fatalf("progress reports with the tap:\n%v\nwithout:\n%v", changes(reports), changes(plainReports))
			}
			if !reflect.DeepEqual(out.Samples, plainOut.Samples) {
				t.Fatal("the output differs with the tap")
			}
			start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			l := int(audio.DurationToSamples(lat, 16000))
			var all []float32
			for i, p := range played {
				if p.p.Audio.Start != int64(len(all)) || p.p.Lost != 0 || p.p.Audio.Rate != 16000 || p.p.Audio.Channels != 1 {
					t.Fatalf("played IU %d: %s after %d samples", i, p.p.Audio.Summary(), len(all))
				}
				if want := start.Add(lat + audio.SamplesToDuration(p.p.Audio.Start, 16000)); !p.p.Heard.Equal(want) {
					t.Fatalf("played IU %d heard at %v, want %v", i, p.p.Heard.Sub(start), want.Sub(start))
				}
				// Sent when the clock reached its last sample's playing time.
				if sent, played := p.at, audio.SamplesToDuration(p.p.Audio.End(), 16000); sent != played {
					t.Fatalf("played IU %d (to %v) sent at %v", i, played, sent)
				}
				all = append(all, p.p.Audio.Samples...)
			}
			// The file is what the listener heard: the played audio after the latency.
			if len(all)+l != len(out.Samples) {
				t.Fatalf("%d played samples, the output has %d after %d of latency", len(all), len(out.Samples), l)
			}
			for i, v := range all {
				if out.Samples[l+i] != v {
					t.Fatalf("played sample %d = %g, the output holds %g", i, v, out.Samples[l+i])
				}
			}
		})
	}
}

// TestFileSpeakerPlayedResampled: a 48 kHz output's played audio is its output
// resampled to 16 kHz, the resampler's tail included.
func TestFileSpeakerPlayedResampled(t *testing.T) {
	a := testAudio{name: "a", turn: 1, f: audio.Frame{Rate: 22050, Channels: 1, Samples: make([]float32, 22050/4)}}
	for i := range a.f.Samples {
		a.f.Samples[i] = float32(0.5 * math.Sin(2*math.Pi*300*float64(i)/22050))
	}
	events := []event{{at: 100 * time.Millisecond, do: add(a, true)}}
	_, played, out := runFileTapped(t, FileConfig{Rate: 48000}, true, events, 600*time.Millisecond)
	want, err := audio.ResampleFrame(out, 16000)
	if err != nil {
		t.Fatal(err)
	}
	var all []float32
	for _, p := range played {
		if p.p.Audio.Start != int64(len(all)) {
			t.Fatalf("played %s after %d samples", p.p.Audio.Summary(), len(all))
		}
		all = append(all, p.p.Audio.Samples...)
	}
	if len(all) != len(want.Samples) {
		t.Fatalf("%d played samples, want %d", len(all), len(want.Samples))
	}
	for i := range all {
		if math.Abs(float64(all[i]-want.Samples[i])) > 1e-6 {
			t.Fatalf("played sample %d = %g, want %g", i, all[i], want.Samples[i])
		}
	}
}

// TestTapLosesOnlyWhatHasNoRoom drives a tapped ring's renderer past a stalled writer:
// the frames it had no room for are reported lost, exactly those, and the stream goes
// on after them.
func TestTapLosesOnlyWhatHasNoRoom(t *testing.T) {
	ring := newRing(64).withTap(16000 / 10) // 2048 frames
	out := &fakeOutput{rate: 16000}
	tr, err := newTapReader(ring, out, audio.QualityDefault)
	if err != nil {
		t.Fatal(err)
	}
	rd := NewRenderer(ring)
	buf := make([]float32, 1000)
	for range 3 { // 3000 frames without a drain
		rd.Render(buf, 1000, 1)
	}
	played, err := tr.drain(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(played) != 1 || played[0].Audio.Start != 0 || played[0].Audio.Len() != 2048 {
		t.Fatalf("first drain: %v", played)
	}
	rd.Render(buf, 500, 1)
	played, err = tr.drain(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(played) != 1 || played[0].Audio.Start != 3000 || played[0].Lost != 952 || played[0].Audio.Len() != 500 {
		t.Fatalf("after the loss: %v", played)
	}
}

// TestTapConcurrent runs a tapped ring's renderer and the tap's reader on two goroutines,
// as the PortAudio callback and the module do: every frame comes out once, in order,
// and the race detector finds nothing.
func TestTapConcurrent(t *testing.T) {
	const total = 100000
	ring := newRing(1 << 12).withTap(1 << 12)
	tr, err := newTapReader(ring, &fakeOutput{rate: 16000}, audio.QualityDefault)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		// The renderer plays whatever the writer wrote: 1, 2, 3, ...
		rd := NewRenderer(ring)
		buf := make([]float32, 97)
		for ring.r.Load() < total {
			rd.Render(buf, 97, 1)
			runtime.Gosched()
		}
	})
	var w int64
	next := float32(1)
	var got []float32 // NaN marks a loss: the count starts again after it
	for {
		for free := int64(len(ring.ring)) - (w - ring.r.Load()); free > 0 && next <= total; free-- {
			ring.ring[w&ring.mask] = next
			w++
			next++
		}
		ring.w.Store(w)
		played, err := tr.drain(false)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range played {
			if p.Lost > 0 {
				got = append(got, float32(math.NaN()))
			}
			got = append(got, p.Audio.Samples...)
		}
		if ring.r.Load() >= total && tr.pos >= ring.tapW.Load() {
			break
		}
		runtime.Gosched()
	}
	wg.Wait()
	var prev float32
	resync := false
	for i, v := range got {
		if v != v {
			resync = true
			continue
		}
		if v != 0 && resync {
			prev, resync = v-1, false
		}
		if v != 0 && v != prev+1 {
			t.Fatalf("played sample %d = %g after %g", i, v, prev)
		}
		if v != 0 {
			prev = v
		}
	}
	if lost := slices.ContainsFunc(got, func(v float32) bool { return v != v }); prev != total && !lost {
		t.Fatalf("the played audio reached sample %g of %d, and nothing was lost", prev, total)
	}
}

// fakeOutput is only a clock for the tap reader.
type fakeOutput struct{ rate int }

func (f *fakeOutput) Open(context.Context, *iu.Ports, time.Time) (int, error) { return f.rate, nil }
func (f *fakeOutput) Begin(*Ring) error                                       { return nil }
func (f *fakeOutput) Rate() int                                               { return f.rate }
func (f *fakeOutput) Advance(time.Time) error                                 { return nil }
func (f *fakeOutput) Kick()                                                   {}
func (f *fakeOutput) HeardFrame(time.Time) int64                              { return 0 }
func (f *fakeOutput) FrameTime(int64) time.Time                               { return time.Time{} }
func (f *fakeOutput) Failed() error                                           { return nil }
func (f *fakeOutput) Close(bool) error                                        { return nil }
