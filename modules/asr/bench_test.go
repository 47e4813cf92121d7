package asr

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/vad"
)

// benchAudio returns a shared recording at 16 kHz mono.
func benchAudio(b testing.TB, name string) []float32 {
	f, err := audio.DecodeWAVFile(testenv.SharedFile(b, "audio/"+name))
	if err != nil {
		b.Fatal(err)
	}
	if f, err = audio.ToPipeline(f); err != nil {
		b.Fatal(err)
	}
	return f.Samples
}

// benchStreaming decodes samples as one utterance the way the ASR module drives an
// engine (20 ms pieces, a partial hypothesis every hop, the final decode) and reports
// the real-time factor: processing time per second of audio.
func benchStreaming(b *testing.B, e Engine, samples []float32, hop int) {
	b.ResetTimer()
	for b.Loop() {
		streamDecode(b, e, samples, hop)
	}
	audioSec := float64(len(samples)) / audio.PipelineRate * float64(b.N)
	b.ReportMetric(b.Elapsed().Seconds()/audioSec, "rtf")
}

func BenchmarkPocketsphinxStreaming(b *testing.B) {
	needPocketsphinx(b)
	for _, final := range []bool{true, false} {
		name := "final-pass"
		if !final {
			name = "streaming-only"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultPocketsphinxConfig()
			cfg.FinalPass = final
			e, err := NewPocketsphinxEngine(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			benchStreaming(b, e, benchAudio(b, "jfk.wav"), int(audio.DurationToSamples(DefaultConfig().Hop, audio.PipelineRate)))
		})
	}
}

// BenchmarkWhisperStreaming re-decodes a growing utterance (goforward.wav, 2.8 s) every
// hop with whisper.cpp's weightless tiny.en test model, whose compute matches a real
// tiny model's encoder (a real model also spends time decoding tokens).
func BenchmarkWhisperStreaming(b *testing.B) {
	for _, hop := range []string{"300ms", "1s"} {
		b.Run("hop-"+hop, func(b *testing.B) {
			e, err := NewWhisperEngine(whisperConfig(b))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			n := 300 * audio.PipelineRate / 1000
			if hop == "1s" {
				n = audio.PipelineRate
			}
			benchStreaming(b, e, benchAudio(b, "goforward.wav"), n)
		})
	}
}

// BenchmarkFinalLatency plays shared recordings in real time through the real VAD and
// the ASR with pocketsphinx (final pass on) and reports how long after the end of turn
// each utterance is committed (eot-to-utterance-ms: the mean over the turns, measured
// where the ASR's and the VAD's consumers receive them), with speculative final
// decoding ("speculative") and without ("at-end-of-turn"); and the time the engine
// spent in FinalOf decodes per turn (final-decode-ms, dropped speculations included).
// "engine-final" hides FinalOf from the module, which then ends each turn with the
// engine's Final as it did before FinalOf existed. Each iteration takes as long as the
// recording plus a second of silence; use -benchtime=Nx.
func BenchmarkFinalLatency(b *testing.B) {
	needPocketsphinx(b)
	for _, name := range []string{"goforward.wav", "jfk.wav"} {
		for _, mode := range []string{"speculative", "at-end-of-turn", "engine-final"} {
			b.Run(strings.TrimSuffix(name, ".wav")+"/"+mode, func(b *testing.B) {
				path := testenv.SharedFile(b, "audio/"+name)
				pe, err := NewPocketsphinxEngine(DefaultPocketsphinxConfig())
				if err != nil {
					b.Fatal(err)
				}
				defer pe.Close()
				warmSideDecoder(b, pe)
				e := &timedEngine{PocketsphinxEngine: pe}
				var eng Engine = e
				if mode == "engine-final" {
					eng = plainEngine{e}
				}
				cfg := DefaultConfig()
				cfg.Speculative = mode == "speculative"
				var latency time.Duration
				turns := 0
				for b.Loop() {
					run := runPipeline(b, path, cfg, eng, pipelineOptions{realClock: true})
					var eots, utts []time.Time
					for _, r := range run.vad {
						if _, ok := r.up.IU.Payload.(vad.EndOfTurn); ok && r.up.Type == iu.Add {
							eots = append(eots, r.when)
						}
					}
					for _, r := range run.asr {
						if _, ok := r.up.IU.Payload.(Utterance); ok && r.up.Type == iu.Add {
							utts = append(utts, r.when)
						}
					}
					if len(utts) == 0 || len(utts) != len(eots) {
						b.Fatalf("%d ends of turn, %d utterances", len(eots), len(utts))
					}
					for i := range utts {
						latency += utts[i].Sub(eots[i])
					}
					turns += len(utts)
				}
				perTurn := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(turns) }
				b.ReportMetric(perTurn(latency), "eot-to-utterance-ms")
				if mode != "engine-final" {
					b.ReportMetric(perTurn(e.finalOf), "final-decode-ms")
				}
			})
		}
	}
}

// warmSideDecoder makes e load its second decoder, which the first FinalOf during a
// streaming utterance would otherwise load inside the measurement.
func warmSideDecoder(b *testing.B, e *PocketsphinxEngine) {
	ctx := context.Background()
	s := benchAudio(b, "goforward.wav")
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := e.Feed(ctx, s); err != nil {
		b.Fatal(err)
	}
	if _, err := e.FinalOf(ctx, s); err != nil {
		b.Fatal(err)
	}
	if _, err := e.Final(ctx); err != nil {
		b.Fatal(err)
	}
}

// timedEngine measures the FinalOf calls of a pocketsphinx engine. Only the worker that
// holds the engine writes the total (the module runs one job at a time, each started
// after the previous one's result arrived); it is read after the network ran.
type timedEngine struct {
	*PocketsphinxEngine
	finalOf time.Duration
}

func (e *timedEngine) FinalOf(ctx context.Context, samples []float32) (Hypothesis, error) {
	start := time.Now()
	h, err := e.PocketsphinxEngine.FinalOf(ctx, samples)
	e.finalOf += time.Since(start)
	return h, err
}

// plainEngine is an Engine and nothing more: the module cannot see its FinalOf.
type plainEngine struct{ Engine }
