package webrtc

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/engines/webrtcapm"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/internal/voices"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/aec/internal/aectest"
	"github.com/parley-voice/parley/modules/aec/measure"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/overlap"
	"github.com/parley-voice/parley/modules/overlap/sphinx"
	"github.com/parley-voice/parley/turntaking"
)

// linearOnly shows a canceller's linear output as its output, for measure.Run.
type linearOnly struct{ *aec.Stream }

func (l linearOnly) Capture(near []float32) ([]float32, error) {
	_, linear, err := l.CaptureLinear(near)
	return linear, err
}

// TestLinearOutput: AEC3's linear filter output, kept beside the cleaned audio, leaves
// the cleaned audio as it is, removes part of the echo (the suppressor removes the
// rest), and keeps the onset of a voice that starts over the agent's, which the
// cleaned audio loses: "stop" in three voices, 5 and 9 s into the agent's voice, is
// "stop" to the overlap recogniser in the linear output's first 250 ms (with the
// 150 ms before it, as the overlap module decodes), and nothing or another word in the
// cleaned audio's.
func TestLinearOutput(t *testing.T) {
	far := aectest.AgentSpeech(t)
	path := aectest.Laptop()
	scene := measure.Scene{Far: far, Path: path, Hint: path.Delay}

	plain := run(t, scene)
	withLinear, err := measure.Run(newCanceller(t, webrtcapm.Config{LinearOutput: true}), scene)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plain.Out, withLinear.Out) {
		t.Error("keeping the linear output changed the cleaned audio")
	}
	linear, err := measure.Run(linearOnly{newCanceller(t, webrtcapm.Config{LinearOutput: true})}, scene)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cleaned: %v\nlinear: %v", plain, linear)
	if linear.ERLE < 15 || linear.ERLE > plain.ERLE-10 {
		t.Errorf("the linear output removes %.1f dB of echo, the cleaned audio %.1f dB: want 15 dB or more, and 10 dB less than the cleaned audio", linear.ERLE, plain.ERLE)
	}

	rec, err := sphinx.New(overlap.Vocabulary{Backchannels: turntaking.DefaultBackchannels["en"], Interrupt: turntaking.DefaultInterruptWords["en"]}, asr.DefaultPocketsphinxConfig())
	if err != nil {
		testenv.Missing(t, "pocketsphinx with its US English model", err.Error())
	}
	defer rec.Close()
	const preRoll, heard = 150 * time.Millisecond, 250 * time.Millisecond
	decode := func(x []float32, at time.Duration) (string, bool) {
		from := int(at.Seconds()*aec.Rate) - int(preRoll.Seconds()*aec.Rate)
		to := int(at.Seconds()*aec.Rate) + int(heard.Seconds()*aec.Rate)
		h, err := rec.FinalOf(context.Background(), x[from:to])
		if err != nil {
			t.Fatal(err)
		}
		return h.Text(), slices.ContainsFunc(h.Words, func(w asr.HypWord) bool { return w.Text == "stop" })
	}
	onsetLoss := func(near, out []float32, at time.Duration) float64 {
		from := int(at.Seconds() * aec.Rate)
		n := int(0.15 * aec.Rate)
		var v, o float64
		for i := from; i < from+n; i++ {
			v += float64(near[i]) * float64(near[i])
			o += float64(out[i]) * float64(out[i])
		}
		return 10 * math.Log10(v/o)
	}
	cache := voices.NewCache(t)
	var inLinear, inCleaned, cases int
	for _, v := range []voices.Voice{voices.FliteSLT, voices.FliteRMS, voices.FestivalKAL} {
		x := voices.Load(t, cache.Say(t, v, "stop"))
		s, e := voices.Bounds(x)
		for _, at := range []time.Duration{5 * time.Second, 9 * time.Second} {
			sc := scene
			sc.Near, sc.NearAt = x[s:e], at
			c := newCanceller(t, webrtcapm.Config{LinearOutput: true})
			var lin []float32
			r, err := measure.Run(capturing{c, &lin}, sc)
			if err != nil {
				t.Fatal(err)
			}
			lin = lin[c.LatencySamples():] // as measure.Run aligns the output
			// The user's voice at the microphone: the microphone less the echo alone.
			near := make([]float32, len(r.Mic))
			for i := range near {
				near[i] = r.Mic[i] - plain.Mic[i]
			}
			cleanedText, cleanedStop := decode(r.Out, at)
			linearText, linearStop := decode(lin, at)
			t.Logf("%s at %v: the first 150 ms lose %.1f dB in the cleaned audio, %.1f dB in the linear output; decoded %q and %q",
				voices.Describe(v, "stop"), at, onsetLoss(near, r.Out, at), onsetLoss(near, lin, at), cleanedText, linearText)
			cases++
			if linearStop {
				inLinear++
			}
			if cleanedStop {
				inCleaned++
			}
		}
	}
	if inLinear < cases-1 || inCleaned > 1 {
		t.Errorf(`"stop" decoded from the linear output %d times, from the cleaned audio %d times, of %d: want at least %d and at most 1`,
			inLinear, inCleaned, cases, cases-1)
	}
}

// capturing is a canceller that keeps its linear output in *linear while measure.Run
// takes the cleaned audio.
type capturing struct {
	*aec.Stream
	linear *[]float32
}

func (c capturing) Capture(near []float32) ([]float32, error) {
	out, linear, err := c.CaptureLinear(near)
	*c.linear = append(*c.linear, linear...)
	return out, err
}
