package asr_test

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/asr/asrtest"
	"github.com/parley-voice/parley/modules/vad"
)

// Levels of the two streams the linear driver sends: the canceller's cleaned audio and
// its linear output.
const (
	cleanedLevel = 0.25
	linearLevel  = 0.5
)

// heardStream is an Engine whose final transcript names the stream it was fed:
// "cleaned", "linear" or "mixed".
type heardStream struct{ cleaned, linear, other int }

func (e *heardStream) Start(context.Context) error { *e = heardStream{}; return nil }

func (e *heardStream) Feed(_ context.Context, s []float32) error {
	for _, x := range s {
		switch x {
		case cleanedLevel:
			e.cleaned++
		case linearLevel:
			e.linear++
		default:
			e.other++
		}
	}
	return nil
}

func (e *heardStream) Partial(context.Context) (asr.Hypothesis, error) { return asr.Hypothesis{}, nil }

func (e *heardStream) Final(context.Context) (asr.Hypothesis, error) {
	word := "mixed"
	switch {
	case e.cleaned > 0 && e.linear == 0 && e.other == 0:
		word = "cleaned"
	case e.linear > 0 && e.cleaned == 0 && e.other == 0:
		word = "linear"
	}
	return asr.Hypothesis{Words: []asr.HypWord{{Text: word, End: 100 * time.Millisecond, Confidence: 1}}}, nil
}

// linearDriver sends what an echo canceller with a linear output sends (modules/aec):
// for each 20 ms frame its linear output (aec.Linear), then the cleaned audio, except
// that every missEvery-th frame (0: none) comes without its linear output. One turn of
// speech lies in the middle.
func linearDriver(withLinear bool, missEvery int) iu.Module {
	return iu.ModuleFunc{ModuleName: "driver", Fn: func(ctx context.Context, p *iu.Ports) error {
		const frames = 100
		var seg iu.IU
		for i := range frames {
			pos := int64(i * frameLen)
			var ups []iu.Update
			switch i {
			case 20:
				seg = p.NewIU(vad.Segment{Start: durOf(pos)})
				ups = append(ups, iu.AddOf(seg))
			case 70:
				pl := seg.Payload.(vad.Segment)
				pl.End = durOf(pos) - 300*time.Millisecond
				eot := p.NewIU(vad.EndOfTurn{SpeechStart: pl.Start, SpeechEnd: pl.End, Silence: 300 * time.Millisecond})
				ups = append(ups, iu.CommitOf(seg), iu.AddOf(eot), iu.CommitOf(eot))
			}
			f := audio.Frame{Samples: make([]float32, frameLen), Rate: audio.PipelineRate, Channels: 1, Start: pos}
			if withLinear && (missEvery == 0 || i%missEvery != 0) {
				l := f
				l.Samples = make([]float32, frameLen)
				for k := range l.Samples {
					l.Samples[k] = linearLevel
				}
				u := p.NewIU(aec.Linear{Audio: l})
				ups = append(ups, iu.AddOf(u), iu.CommitOf(u))
			}
			for k := range f.Samples {
				f.Samples[k] = cleanedLevel
			}
			u := p.NewIU(f)
			ups = append(ups, iu.AddOf(u), iu.CommitOf(u))
			if err := p.Send(ctx, ups...); err != nil {
				return err
			}
		}
		return nil
	}}
}

// TestModuleDecodesLinear: with DecodeLinear the recogniser decodes an echo canceller's
// linear output where there is one, and the audio itself where there is none.
func TestModuleDecodesLinear(t *testing.T) {
	tests := []struct {
		name         string
		decodeLinear bool
		withLinear   bool
		missEvery    int
		want         string
	}{
		{name: "the linear output", decodeLinear: true, withLinear: true, want: "linear"},
		{name: "the cleaned audio when not asked", withLinear: true, want: "cleaned"},
		{name: "the audio when no canceller gives a linear output", decodeLinear: true, want: "cleaned"},
		{name: "the audio of a frame whose linear output is missing", decodeLinear: true, withLinear: true, missEvery: 7, want: "mixed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := scriptedConfig()
			cfg.Speculative = false
			cfg.DecodeLinear = tc.decodeLinear
			got, err := runDriver(t, cfg, &heardStream{}, linearDriver(tc.withLinear, tc.missEvery), false, nil)
			if err != nil {
				t.Fatal(err)
			}
			asrtest.Contract(t, got)
			var text string
			for _, r := range got {
				if u, ok := r.Up.IU.Payload.(asr.Utterance); ok {
					text = u.Text
				}
			}
			if text != tc.want {
				t.Fatalf("the recogniser heard %q, want %q (updates %q)", text, tc.want, asrtest.Trace(got))
			}
		})
	}
}
