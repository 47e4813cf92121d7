package sphinx_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/internal/voices"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modelstore"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/overlap"
	"github.com/parley-voice/parley/modules/overlap/sphinx"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/modules/vad/silero"
	"github.com/parley-voice/parley/turntaking"
)

var virtualStart = time.Unix(1000, 0)

// backchannels and interrupt words: the manager's defaults.
var testVocabulary = overlap.Vocabulary{
	Backchannels: turntaking.DefaultBackchannels["en"],
	Interrupt:    turntaking.DefaultInterruptWords["en"],
}

func openRecognizer(t testing.TB) *sphinx.Recognizer {
	t.Helper()
	r, err := sphinx.New(testVocabulary, asr.DefaultPocketsphinxConfig())
	if err != nil {
		testenv.Missing(t, "pocketsphinx with its US English model", err.Error())
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func openVAD(t testing.TB) *vad.Module {
	t.Helper()
	if err := ggml.LoadBackends(); err != nil {
		testenv.Missing(t, "a ggml CPU backend", testenv.EnvFix)
	}
	whisper.SetLogger(whisper.LogNone, nil)
	cfg := vad.DefaultConfig()
	cfg.Model = testenv.SharedFile(t, "models/"+modelstore.DefaultFile(modelstore.KindVAD))
	scorer, err := silero.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scorer.Close() })
	v, err := vad.New("vad", cfg, scorer)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// audible tells the VAD that the agent is audible all along.
type audible struct{}

func (audible) Kind() string    { return "progress" }
func (audible) Summary() string { return "audible" }
func (audible) Audible() bool   { return true }

// agent sends one audible report at the start.
func agent() iu.Module {
	return iu.ModuleFunc{ModuleName: "speaker", Fn: func(ctx context.Context, p *iu.Ports) error {
		u := p.NewIU(audible{})
		return p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
	}}
}

// seen is an evidence update and when it was sent (since the start).
type seen struct {
	at  time.Duration
	typ iu.UpdateType
	ev  overlap.Evidence
}

func collect(out *[]seen) iu.Module {
	return iu.ModuleFunc{ModuleName: "sink", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case iu.EventMessage:
				for _, up := range ev.Message.Updates {
					if e, ok := up.IU.Payload.(overlap.Evidence); ok {
						*out = append(*out, seen{at: p.Now().Sub(virtualStart), typ: up.Type, ev: e})
					}
				}
			case iu.EventInputDone:
				return nil
			}
		}
	}}
}

// follow plays sound (placed at lead) through the VAD and the overlap module on a
// virtual clock while the agent is audible, and returns the evidence updates.
func follow(t *testing.T, rec overlap.Recognizer, sound []float32, lead time.Duration) []seen {
	t.Helper()
	samples := append(make([]float32, audio.DurationToSamples(lead, audio.PipelineRate)), sound...)
	path := filepath.Join(t.TempDir(), "in.wav")
	if err := audio.WriteWAVFile(path, audio.Frame{Rate: 16000, Channels: 1, Samples: samples}, 16); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewVirtual(virtualStart)
	defer clk.Close()
	net := iu.NewNetwork(iu.WithClock(clk))
	src, err := source.NewFile("source", path, source.Config{TailSilence: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := overlap.DefaultConfig()
	cfg.Enabled = true
	om, err := overlap.New("overlap", cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	var got []seen
	if err := net.Add(src, openVAD(t), om, agent(), collect(&got)); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"source", "vad"}, {"source", "overlap"}, {"vad", "overlap"}, {"speaker", "vad"}, {"overlap", "sink"}} {
		if err := net.ConnectNames(c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return got
}

func describe(got []seen, onset time.Duration) string {
	var b strings.Builder
	for _, s := range got {
		fmt.Fprintf(&b, "\n  %+5dms %-6s %s", (s.at - onset).Milliseconds(), s.typ, s.ev.Summary())
	}
	return b.String()
}

// TestEvidenceInVoices follows sounds in voices no other test uses through the real
// VAD and recogniser: what the evidence says, and when.
func TestEvidenceInVoices(t *testing.T) {
	rec := openRecognizer(t)
	cache := voices.NewCache(t)
	const lead = 500 * time.Millisecond
	type check struct {
		voice voices.Voice
		text  string
		// last is the final decode; within is how soon (from the sound's onset) a decode
		// must first hold early (last's first word when empty; 0: only the final decode
		// counts).
		last   string
		within time.Duration
		early  string
	}
	checks := []check{
		{voices.FliteSLT, "yeah", "yeah", 300 * time.Millisecond, ""},
		{voices.FliteRMS, "okay", "okay", 350 * time.Millisecond, ""},
		{voices.FestivalKAL, "right", "right", 300 * time.Millisecond, ""},
		{voices.FliteAWB, "I see", "i see", 0, ""},
		{voices.FliteSLT, "stop", "stop", 350 * time.Millisecond, ""},
		{voices.FliteRMS, "stop", "stop", 300 * time.Millisecond, ""},
		{voices.FestivalSLT, "stop", "stop", 350 * time.Millisecond, ""},
		{voices.FestivalSLT, "wait, stop", "wait stop", 250 * time.Millisecond, ""},
		{voices.FliteRMS, "no, I meant the other one", "no", 250 * time.Millisecond, ""},
		// The phrase's bigram turns "he old on" into "hold on".
		{voice: voices.FliteSLT, text: "hold on a second", within: 600 * time.Millisecond, early: "hold on"},
		{voice: voices.FestivalSLT, text: "hold on a second", last: "hold on a second", within: 700 * time.Millisecond, early: "hold on"},
	}
	for _, c := range checks {
		t.Run(voices.Describe(c.voice, c.text), func(t *testing.T) {
			s := voices.Load(t, cache.Say(t, c.voice, c.text))
			on, _ := voices.Bounds(s)
			onset := lead + audio.SamplesToDuration(int64(on), 16000)
			got := follow(t, rec, s, lead)
			if len(got) == 0 || got[len(got)-1].typ != iu.Commit {
				t.Fatalf("no committed evidence:%s", describe(got, onset))
			}
			final := got[len(got)-1].ev
			if !strings.HasPrefix(final.Text(), c.last) || final.Sound != overlap.Voice || !final.Ended {
				t.Errorf("final evidence %q (%s, ended %v), want %q from a voice:%s", final.Text(), final.Sound, final.Ended, c.last, describe(got, onset))
			}
			if c.within == 0 {
				return
			}
			first := c.early
			if first == "" {
				first = strings.Fields(c.last)[0]
			}
			for _, u := range got {
				if strings.Contains(" "+u.ev.Text()+" ", " "+first+" ") {
					if d := u.at - onset; d > c.within {
						t.Errorf("%q first decoded %v after the onset, want within %v:%s", first, d, c.within, describe(got, onset))
					}
					return
				}
			}
			t.Errorf("no decode held %q:%s", first, describe(got, onset))
		})
	}
	// Hums and noises: a hum is judged one and decodes to no word that could interrupt;
	// the VAD withdraws noises or never takes them for speech.
	for _, h := range []struct {
		name  string
		sound []float32
		hum   bool
	}{
		{"hummed mm-hmm", voices.Hum(voices.MmHmm, 110, 0.4), true},
		{"hummed hmm", voices.Hum(voices.Hmm, 200, 0.4), true},
		{"cough", voices.Cough(1, 0.5), false},
		{"noise burst", voices.Noise(1, 0.15, 0.4), false},
	} {
		t.Run(h.name, func(t *testing.T) {
			got := follow(t, rec, h.sound, lead)
			if !h.hum {
				if len(got) > 0 && !got[len(got)-1].ev.Dropped && got[len(got)-1].ev.Sound != overlap.Noise {
					t.Errorf("a noise followed as %s:%s", got[len(got)-1].ev.Sound, describe(got, lead))
				}
				return
			}
			if len(got) == 0 {
				t.Fatal("the hum was not followed")
			}
			final := got[len(got)-1].ev
			if final.Sound != overlap.Hum {
				t.Errorf("judged %s:%s", final.Sound, describe(got, lead))
			}
			for _, u := range got {
				for _, w := range u.ev.Words {
					if slices.Contains(testVocabulary.Interrupt, w.Text) {
						t.Errorf("a hum decoded to %q:%s", w.Text, describe(got, lead))
					}
				}
			}
		})
	}
}

// BenchmarkDecode times one decode of the overlap recogniser on a sound of 400 ms with
// its 150 ms pre-roll: the work the module does every hop while the user speaks over
// the agent (it bounds the hop on the real clock).
func BenchmarkDecode(b *testing.B) {
	rec := openRecognizer(b)
	cache := voices.NewCache(b)
	s := voices.Load(b, cache.Say(b, voices.FliteRMS, "wait, stop"))
	on, _ := voices.Bounds(s)
	from := max(on-16*150, 0)
	clip := s[from : on+16*400]
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if _, err := rec.FinalOf(ctx, clip); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/decode")
}
