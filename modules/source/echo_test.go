package source

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap/zaptest"
)

type testPlayed struct {
	f     audio.Frame
	heard time.Time
}

func (p testPlayed) Kind() string                          { return "played" }
func (p testPlayed) Summary() string                       { return p.f.Summary() }
func (p testPlayed) PlayedAudio() (audio.Frame, time.Time) { return p.f, p.heard }

func randomSignal(n int, seed uint64, amp float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(amp * rng.NormFloat64())
	}
	return x
}

// runEcho plays user (the recording, in frames of frame samples) and far (the speaker's
// played stream, in IUs of chunk samples, heard outLat after it is played) through the
// echo simulator on a virtual clock, and returns its output and whether it passed the
// end of the stream on.
func runEcho(t *testing.T, cfg room.Config, user, far []float32, frame, chunk int, outLat time.Duration) ([]float32, bool) {
	t.Helper()
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	v := clock.NewVirtual(start)
	defer v.Close()
	at := func(ctx context.Context, p *iu.Ports, d time.Duration) error {
		_, err := waitUntil(ctx, p, start.Add(d), func(iu.Message, time.Time) {})
		return err
	}
	src := iu.ModuleFunc{ModuleName: "input", Fn: func(ctx context.Context, p *iu.Ports) error {
		for pos := 0; pos < len(user); pos += frame {
			end := min(pos+frame, len(user))
			if err := at(ctx, p, audio.SamplesToDuration(int64(end), 16000)); err != nil {
				return err
			}
			u := p.NewIU(audio.Frame{Samples: user[pos:end], Rate: 16000, Channels: 1, Start: int64(pos)})
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
		}
		u := p.NewIU(audio.EndOfStream{Pos: int64(len(user)), Rate: 16000})
		return p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
	}}
	spk := iu.ModuleFunc{ModuleName: "speaker", Fn: func(ctx context.Context, p *iu.Ports) error {
		for j := 0; j < len(far); j += chunk {
			end := min(j+chunk, len(far))
			if err := at(ctx, p, audio.SamplesToDuration(int64(end), 16000)); err != nil {
				return err
			}
			f := audio.Frame{Samples: far[j:end], Rate: 16000, Channels: 1, Start: int64(j)}
			u := p.NewIU(testPlayed{f: f, heard: start.Add(outLat + audio.SamplesToDuration(int64(j), 16000))})
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
		}
		return nil
	}}
	echo, err := NewEcho("echo", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out []float32
	eos := false
	sink := iu.ModuleFunc{ModuleName: "vad", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil || ev.Kind == iu.EventInputDone {
				return err
			}
			mu.Lock()
			for _, up := range ev.Message.Updates {
				switch pl := up.IU.Payload.(type) {
				case audio.Frame:
					if up.Type == iu.Add {
						if pl.Start != int64(len(out)) || eos {
							t.Errorf("frame %s after %d samples (end of stream %v)", pl.Summary(), len(out), eos)
						}
						out = append(out, pl.Samples...)
					}
				case audio.EndOfStream:
					eos = true
				}
			}
			mu.Unlock()
		}
	}}
	net := iu.NewNetwork(iu.WithClock(v), iu.WithLogger(zaptest.NewLogger(t)))
	if err := net.Add(src, spk, echo, sink); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"input", "echo"}, {"speaker", "echo"}, {"echo", "vad"}} {
		if err := net.ConnectNames(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return out, eos
}

// TestEchoMixesThePath: the output is the recording plus exactly what audio/room makes of
// the played audio as the listener heard it on the recording's timeline — delay, gain,
// reverberation and noise — whatever the delay (shorter than a frame included), the
// frame and IU sizes and the output latency.
func TestEchoMixesThePath(t *testing.T) {
	const n = 2 * 16000
	user := randomSignal(n, 1, 0.1)
	far := randomSignal(n, 2, 0.3)
	for _, tc := range []struct {
		delay        time.Duration
		frame, chunk int
		outLat       time.Duration
		rt60         time.Duration
		noiseDB      float64
	}{
		{delay: 30 * time.Millisecond, frame: 320, chunk: 160, outLat: 50 * time.Millisecond, rt60: 300 * time.Millisecond, noiseDB: -60},
		{delay: 5 * time.Millisecond, frame: 320, chunk: 160, rt60: 100 * time.Millisecond},
		{delay: 0, frame: 333, chunk: 77},
		{delay: 200 * time.Millisecond, frame: 160, chunk: 800, outLat: 20 * time.Millisecond},
	} {
		t.Run(fmt.Sprintf("delay %v frame %d chunk %d", tc.delay, tc.frame, tc.chunk), func(t *testing.T) {
			cfg := room.Config{Delay: tc.delay, GainDB: -6, RT60: tc.rt60, NoiseDB: tc.noiseDB, Seed: 3}
			got, eos := runEcho(t, cfg, user, far, tc.frame, tc.chunk, tc.outLat)
			if len(got) != n || !eos {
				t.Fatalf("%d samples of %d, end of stream passed on %v", len(got), n, eos)
			}
			// The reference: the heard stream (silence before the output latency) through the whole path.
			lat := int(audio.DurationToSamples(tc.outLat, 16000))
			heard := make([]float32, n)
			copy(heard[lat:], far)
			path, err := room.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			echo := path.Process(heard)
			for i := range got {
				if want := user[i] + echo[i]; math.Abs(float64(got[i]-want)) > 1e-6 {
					t.Fatalf("sample %d = %g, want %g (user %g + echo %g)", i, got[i], want, user[i], echo[i])
				}
			}
		})
	}
}

func TestNewEchoRejects(t *testing.T) {
	for _, cfg := range []room.Config{{GainDB: 3}, {Delay: -time.Second}, {Rate: 48000}} {
		if _, err := NewEcho("echo", cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := NewEcho("a/b", room.Config{GainDB: -6}); err == nil {
		t.Error("bad name accepted")
	}
}
