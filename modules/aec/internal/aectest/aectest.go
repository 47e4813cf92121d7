// Package aectest provides the real speech the echo cancellers are measured with: the
// agent's voice from espeak-ng and user recordings from the shared test assets.
package aectest

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/aec/measure"
)

// AgentText is what the simulated agent says: a long reply with the pauses of real
// speech between clauses (about 25 seconds).
const AgentText = "Of course. Here is what I found about the weather for the weekend. " +
	"On Saturday morning it will be cloudy, with a little rain in the north, and the wind will pick up in the afternoon. " +
	"Sunday looks brighter: sunshine for most of the day, and temperatures around nineteen degrees. " +
	"If you are planning a walk, Sunday afternoon is the better choice. " +
	"Would you like me to set a reminder, or shall I look up a trail near you?"

// Laptop is the simulated laptop: 30 ms delay, −6 dB, RT60 300 ms.
func Laptop() room.Config {
	return room.Config{Delay: 30 * time.Millisecond, GainDB: -6, RT60: 300 * time.Millisecond, Seed: 1}
}

// AgentSpeech synthesises AgentText with the espeak-ng command at the pipeline's rate.
func AgentSpeech(t testing.TB) []float32 {
	t.Helper()
	bin := testenv.Command(t, "espeak-ng", testenv.EnvFix)
	// A file, not --stdout: a stream's WAV header cannot give the length.
	wav := filepath.Join(t.TempDir(), "agent.wav")
	if out, err := exec.Command(bin, "-w", wav, "-v", "en-us", AgentText).CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, out)
	}
	f, err := audio.DecodeWAVFile(wav)
	if err != nil {
		t.Fatalf("espeak-ng output: %v", err)
	}
	return pipeline(t, f)
}

// Recording loads a shared recording (name like "jfk.wav") at the pipeline's rate.
func Recording(t testing.TB, name string) []float32 {
	t.Helper()
	f, err := audio.DecodeWAVFile(testenv.SharedFile(t, "audio/"+name))
	if err != nil {
		t.Fatal(err)
	}
	return pipeline(t, f)
}

// Recordings concatenates shared recordings with gap seconds of silence between them.
func Recordings(t testing.TB, gap time.Duration, names ...string) []float32 {
	t.Helper()
	var x []float32
	for i, name := range names {
		if i > 0 {
			x = append(x, make([]float32, audio.DurationToSamples(gap, audio.PipelineRate))...)
		}
		x = append(x, Recording(t, name)...)
	}
	return x
}

func pipeline(t testing.TB, f audio.Frame) []float32 {
	t.Helper()
	p, err := audio.ToPipeline(f)
	if err != nil {
		t.Fatal(err)
	}
	return p.Samples
}

// BenchmarkCanceller measures the CPU cost of c per second of 16 kHz audio: the agent's
// voice rendered and its echo through Laptop captured, 10 ms at a time. It reports
// rtf, CPU seconds per audio second (the benchmark runs on one goroutine, so wall
// time is CPU time).
func BenchmarkCanceller(b *testing.B, c aec.Canceller) {
	far := AgentSpeech(b)
	path, err := room.New(Laptop())
	if err != nil {
		b.Fatal(err)
	}
	mic := path.Process(far)
	c.SetDelay(Laptop().Delay)
	const second, frame = aec.Rate, aec.Rate / 100
	pos := 0
	b.ResetTimer()
	for b.Loop() {
		if pos+second > len(far) {
			pos = 0
		}
		for i := pos; i < pos+second; i += frame {
			if err := c.Render(far[i : i+frame]); err != nil {
				b.Fatal(err)
			}
			if _, err := c.Capture(mic[i : i+frame]); err != nil {
				b.Fatal(err)
			}
		}
		pos += second
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "rtf")
}

// BenchmarkERLE runs the measurements on Laptop with the agent's voice and
// reports them as benchmark metrics (run with -benchtime 1x; every iteration is the
// same deterministic run): erle-dB after convergence, conv-s (convergence time),
// above25-% (far-only windows after 1 s at ≥ 25 dB), and from a second run with a user
// recording (jfk.wav, as loud as the echo) from 5 s on, dt-atten-dB (near-end
// attenuation) and dt-gain-dB (how much the near-to-rest ratio improved).
func BenchmarkERLE(b *testing.B, hint time.Duration, newCanceller func() aec.Canceller) {
	far := AgentSpeech(b)
	near := Recording(b, "jfk.wav")
	path := Laptop()
	var echoOnly, double measure.Result
	for b.Loop() {
		for _, s := range []struct {
			scene measure.Scene
			res   *measure.Result
		}{
			{measure.Scene{Far: far, Path: path, Hint: hint}, &echoOnly},
			{measure.Scene{Far: far, Near: near, NearAt: 5 * time.Second, Path: path, Hint: hint}, &double},
		} {
			c := newCanceller()
			r, err := measure.Run(c, s.scene)
			c.Close()
			if err != nil {
				b.Fatal(err)
			}
			*s.res = r
		}
	}
	b.ReportMetric(echoOnly.ERLE, "erle-dB")
	b.ReportMetric(echoOnly.Convergence.Seconds(), "conv-s")
	b.ReportMetric(100*echoOnly.AboveTarget, "above25-%")
	b.ReportMetric(double.DoubleTalk.NearAttenuation, "dt-atten-dB")
	b.ReportMetric(double.DoubleTalk.NearToRestOut-double.DoubleTalk.NearToRestMic, "dt-gain-dB")
	b.Logf("echo only: %v", echoOnly)
	b.Logf("double talk: %v", double)
}
