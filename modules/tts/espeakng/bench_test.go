package espeakng_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/tts"
)

// benchClauses are clauses of the kind an LLM writes, with numbers, money and accents.
func benchClauses() []string {
	return []string{
		"Sure, I can help with that.",
		"The meeting is at 3:30 p.m. on Friday, the 12th of May.",
		"It costs about $4.99, which is 20% less than last year.",
		"Café au lait and crème brûlée are on the menu today!",
		"In 1999, about 1,250 people lived in the village of Zürich's outskirts.",
	}
}

// BenchmarkFirstChunkLatency measures, on the real clock, the time from sending a clause's
// commit to the module to receiving its first speech chunk (first-chunk-ms, with its
// median and 95th percentile), one clause per op; ns/op is the time until the clause's
// last chunk. The sub-benchmarks compare the default word hold with streaming every word
// at once.
func BenchmarkFirstChunkLatency(b *testing.B) {
	engine := openEngine(b, tts.DefaultConfig())
	for _, hold := range []time.Duration{tts.DefaultConfig().WordHold, 0} {
		b.Run(fmt.Sprintf("word_hold=%v", hold), func(b *testing.B) {
			cfg := tts.DefaultConfig()
			cfg.WordHold = hold
			benchmarkFirstChunk(b, cfg, engine)
		})
	}
}

func benchmarkFirstChunk(b *testing.B, cfg tts.Config, engine tts.Engine) {
	m, err := tts.New("tts", cfg, engine)
	if err != nil {
		b.Fatal(err)
	}
	clauses := benchClauses()
	latencies := make([]time.Duration, 0, b.N)
	feeder := iu.ModuleFunc{ModuleName: "feeder", Fn: func(ctx context.Context, p *iu.Ports) error {
		b.ResetTimer()
		for i := range b.N {
			u := p.NewIU(tts.Text{TurnID: i, Text: clauses[i%len(clauses)]})
			sent := time.Now()
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
			first := true
			for done := false; !done; {
				ev, err := p.Next(ctx, time.Time{})
				if err != nil {
					return err
				}
				if ev.Kind != iu.EventMessage {
					return fmt.Errorf("unexpected event %d", ev.Kind)
				}
				for _, up := range ev.Message.Updates {
					c, ok := up.IU.Payload.(tts.Chunk)
					if !ok || up.Type != iu.Add {
						continue
					}
					if first {
						latencies = append(latencies, time.Since(sent))
						first = false
					}
					done = done || c.LastOfClause
				}
			}
		}
		b.StopTimer()
		return nil
	}}
	net := iu.NewNetwork()
	for _, err := range []error{net.Add(feeder, m), net.Connect(feeder, m), net.Connect(m, feeder)} {
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := net.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	reportLatencies(b, "first-chunk", latencies)
}

func reportLatencies(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(sum/time.Duration(len(ds))), name+"-ms")
	b.ReportMetric(ms(ds[len(ds)/2]), name+"-p50-ms")
	b.ReportMetric(ms(ds[(len(ds)*95)/100]), name+"-p95-ms")
}

// BenchmarkSynthesisRTF measures the real-time factor of the module's synthesis path
// (normalisation, espeak-ng, word mapping, chunking), one clause per op: rtf is processing
// time over audio time, x-realtime its inverse.
func BenchmarkSynthesisRTF(b *testing.B) {
	cfg := tts.DefaultConfig()
	engine := openEngine(b, cfg)
	m, err := tts.New("tts", cfg, engine)
	if err != nil {
		b.Fatal(err)
	}
	clauses := benchClauses()
	var samples int64
	var chunks int
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		err := m.Synthesize(ctx, i, 0, clauses[i%len(clauses)], true, func(cs []tts.Chunk) error {
			for _, c := range cs {
				samples += int64(c.Audio.Len())
			}
			chunks += len(cs)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	audioTime := float64(samples) / float64(engine.SampleRate())
	b.ReportMetric(b.Elapsed().Seconds()/audioTime, "rtf")
	b.ReportMetric(audioTime/b.Elapsed().Seconds(), "x-realtime")
	b.ReportMetric(audioTime/float64(b.N), "audio-s/op")
	b.ReportMetric(float64(chunks)/float64(b.N), "chunks/op")
}
