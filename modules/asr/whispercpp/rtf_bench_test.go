package whispercpp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/internal/shapemodels"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/asr/asrtest"
)

// rtfRecording is the utterance BenchmarkIncrementalRTF decodes (a 2.4 s command, spoken
// by a person); PARLEY_RTF_AUDIO names another file of ../shared/audio.
const rtfRecording = "v2j_turn_on_living_room_lamp.wav"

// shapeFix is what to do when a shape model cannot be built.
const shapeFix = "scripts/shape-models builds it from ../shared with python3-gguf and llama-quantize; " + testenv.EnvFix

// shapeModel returns the cached file of a built-in shape, building it when needed (from
// the shared assets, never downloading).
func shapeModel(b *testing.B, name string) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := shapemodels.Ensure(ctx, name)
	if err != nil {
		testenv.Missing(b, "the "+name+" shape model ("+err.Error()+")", shapeFix)
	}
	return p
}

// BenchmarkIncrementalRTF measures what incremental whisper recognition costs with models
// of the real tiny.en and base.en shapes (random weights: the cost, not the words), decoded
// as the ASR module does live: the growing utterance is decoded on every hop (a partial
// hypothesis: greedy, no fallback, encoder window cut to the audio) and once at the end
// (the final decode: the full 30 s window, as asr.DefaultWhisperConfig sets it, fallback
// off because random weights fail every quality check and would only retry).
//
// "alone" has the machine to itself; "llm" keeps an LLM of Qwen2.5-0.5B-Instruct's shape
// generating on one thread throughout (the agent's default LLM thread count on two cores).
// Metrics, averaged over the passes:
//
//   - rtf: compute time (partials and final) per second of audio;
//   - partial-rtf: the partials' compute time per second of audio: above 1, recognition
//     falls behind the speaker and the module skips hops;
//   - worst-partial-ms: the slowest partial of a pass (the last one, of the longest audio),
//     to compare with the hop: a partial slower than its hop delays the next one;
//   - final-ms: the final decode, which the end of turn (or the speculation before it)
//     waits for;
//   - final-short-ms: the same decode with the partials' short encoder window, which
//     today's final does not use (timed apart, not counted in rtf);
//   - llm-tok/s (variant llm): the LLM's generation speed meanwhile;
//   - load1: the machine's one-minute load average at the end (Linux), since other work
//     on the machine moves every figure. It counts the benchmark's own busy threads too
//     (about 1-2 alone, 2-3 with the LLM), so on two cores only what exceeds that is
//     someone else's.
//
// Run it with passive OpenMP waiting, as the agent runs (internal/ompwait):
//
//	scripts/env env OMP_WAIT_POLICY=passive go test -run '^$' -bench IncrementalRTF -benchtime 3x ./modules/asr/whispercpp/
func BenchmarkIncrementalRTF(b *testing.B) {
	if err := ggml.LoadBackends(); err != nil {
		testenv.Missing(b, "a ggml CPU backend", testenv.EnvFix)
	}
	whisper.SetLogger(whisper.LogNone, nil)
	llama.SetLogger(llama.LogNone, nil)
	recording := rtfRecording
	if s := os.Getenv("PARLEY_RTF_AUDIO"); s != "" {
		recording = s
	}
	samples := asrtest.SharedAudio(b, recording)
	b.Logf("%s: %.2f s of audio; OMP_WAIT_POLICY=%q", recording, seconds(len(samples)), os.Getenv("OMP_WAIT_POLICY"))

	shapes := []struct{ name, model string }{
		{"tiny.en", shapemodels.WhisperTinyEn},
		{"base.en", shapemodels.WhisperBaseEn},
	}
	hops := []time.Duration{200 * time.Millisecond, 300 * time.Millisecond, 500 * time.Millisecond}
	for _, load := range []string{"alone", "llm"} {
		b.Run(load, func(b *testing.B) {
			var llmTokens *atomic.Int64
			if load == "llm" {
				llmTokens = generateMeanwhile(b)
			}
			for _, s := range shapes {
				b.Run(s.name, func(b *testing.B) {
					e := newShapeEngine(b, shapeModel(b, s.model))
					for _, threads := range []int{1, 2} {
						for _, hop := range hops {
							b.Run(fmt.Sprintf("threads-%d/hop-%v", threads, hop), func(b *testing.B) {
								e.cfg.Threads = threads
								benchIncremental(b, e, samples, hop, llmTokens)
							})
						}
					}
				})
			}
		})
	}
}

// newShapeEngine loads a whisper shape with the module's default settings, apart from the
// final decode's fallback (see BenchmarkIncrementalRTF).
func newShapeEngine(b *testing.B, path string) *Engine {
	b.Helper()
	cfg := asr.DefaultWhisperConfig()
	cfg.Model = path
	cfg.Fallback = false
	e, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

// benchIncremental decodes samples as one utterance per pass and reports the metrics of
// BenchmarkIncrementalRTF. llmTokens, when not nil, counts the tokens an LLM generates
// meanwhile.
func benchIncremental(b *testing.B, e *Engine, samples []float32, hop time.Duration, llmTokens *atomic.Int64) {
	hopSamples := audio.DurationToSamples(hop, audio.PipelineRate)
	// A short partial first, so that the passes measured do not pay for first-use
	// allocations.
	e.audio = append(e.audio[:0], samples[:min(len(samples), int(hopSamples))]...)
	if _, err := e.Partial(context.Background()); err != nil {
		b.Fatal(err)
	}
	var partials, worst, finals, finalsShort time.Duration
	var passes, tokens0 int64
	if llmTokens != nil {
		tokens0 = llmTokens.Load()
	}
	for b.Loop() {
		p := incrementalPass(b, e, samples, int(hopSamples))
		for _, d := range p.partials {
			partials += d
		}
		worst += maxOf(p.partials)
		finals += p.final
		finalsShort += p.finalShort
		passes++
	}
	elapsed := b.Elapsed()
	audioSec := seconds(len(samples)) * float64(passes)
	ms := func(d time.Duration) float64 { return float64(d) / float64(passes) / 1e6 }
	b.ReportMetric((partials+finals).Seconds()/audioSec, "rtf")
	b.ReportMetric(partials.Seconds()/audioSec, "partial-rtf")
	b.ReportMetric(ms(worst), "worst-partial-ms")
	b.ReportMetric(ms(finals), "final-ms")
	b.ReportMetric(ms(finalsShort), "final-short-ms")
	if llmTokens != nil {
		b.ReportMetric(float64(llmTokens.Load()-tokens0)/elapsed.Seconds(), "llm-tok/s")
	}
	if l, ok := loadAverage(); ok {
		// Other work on the machine moves every figure; this says how busy it was.
		b.ReportMetric(l, "load1")
	}
}

// loadAverage returns the machine's one-minute load average, where /proc has it.
func loadAverage() (float64, bool) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	var l float64
	if _, err := fmt.Sscan(string(data), &l); err != nil {
		return 0, false
	}
	return l, true
}

// pass is the decode times of one utterance.
type pass struct {
	partials   []time.Duration
	final      time.Duration
	finalShort time.Duration
}

// incrementalPass feeds samples to e in 20 ms frames, as the pipeline delivers them, asks
// for a partial hypothesis whenever hop more samples came, and ends with the final decode.
// Live, audio that arrives during a decode waits for the next one; here every hop gets its
// partial, so that the cost per second of audio is that of a recogniser keeping up.
func incrementalPass(b *testing.B, e *Engine, samples []float32, hop int) pass {
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	frame := int(audio.DurationToSamples(20*time.Millisecond, audio.PipelineRate))
	var p pass
	since := 0
	for i := 0; i < len(samples); i += frame {
		piece := samples[i:min(i+frame, len(samples))]
		if err := e.Feed(ctx, piece); err != nil {
			b.Fatal(err)
		}
		if since += len(piece); since >= hop {
			since = 0
			t := time.Now()
			if _, err := e.Partial(ctx); err != nil {
				b.Fatal(err)
			}
			p.partials = append(p.partials, time.Since(t))
		}
	}
	t := time.Now()
	if _, err := e.Final(ctx); err != nil {
		b.Fatal(err)
	}
	p.final = time.Since(t)
	// Not part of the pass: what the final decode would cost with the partials' short
	// encoder window (asr.WhisperConfig.ShortContext applied to it too).
	t = time.Now()
	if _, err := e.decodeOf(ctx, samples, whisper.DecodeParams{BeamSize: e.cfg.BeamSize, NoFallback: true, AudioContext: whisper.AudioContextFor(len(samples))}); err != nil {
		b.Fatal(err)
	}
	p.finalShort = time.Since(t)
	return p
}

// generateMeanwhile loads the Qwen2.5-0.5B shape on one thread (llama.cpp's default on two
// cores) and keeps it generating greedily until the benchmark ends; the counter it
// returns grows by one per token decoded.
func generateMeanwhile(b *testing.B) *atomic.Int64 {
	b.Helper()
	path := shapeModel(b, shapemodels.Qwen25_05B)
	m, err := llama.LoadModel(path, llama.ModelParams{UseMmap: true})
	if err != nil {
		b.Fatal(err)
	}
	lctx, err := llama.NewContext(m, llama.ContextParams{NCtx: 512, Threads: 1})
	if err != nil {
		m.Close()
		b.Fatal(err)
	}
	sampler, err := llama.NewSampler(llama.SamplerParams{})
	if err != nil {
		lctx.Close()
		m.Close()
		b.Fatal(err)
	}
	prompt, err := m.Tokenize("User: What is the weather like in Paris today?\nAssistant:", true, true)
	if err != nil {
		sampler.Close()
		lctx.Close()
		m.Close()
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tokens := new(atomic.Int64)
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- generateReplies(ctx, lctx, sampler, prompt, tokens, first)
	}()
	b.Cleanup(func() {
		cancel()
		err := <-done
		if errors.Is(err, context.Canceled) || errors.Is(err, llama.ErrAborted) {
			err = nil
		}
		if err = errors.Join(err, sampler.Close(), lctx.Close(), m.Close()); err != nil {
			b.Error(err)
		}
	})
	// The measurement starts with the LLM in its loop.
	select {
	case <-first:
	case err := <-done:
		done <- err
		b.Fatalf("the LLM stopped before its first token: %v", err)
	case <-time.After(time.Minute):
		b.Fatal("the LLM generated no token within a minute")
	}
	return tokens
}

// generateReplies generates replies of 128 tokens to prompt, one after the other, until
// ctx ends (random weights never end a reply by themselves). It counts the tokens and
// closes first after the first one.
func generateReplies(ctx context.Context, lctx *llama.Context, sampler *llama.Sampler, prompt []llama.Token, tokens *atomic.Int64, first chan<- struct{}) error {
	const reply = 128
	for {
		if err := lctx.Clear(); err != nil {
			return err
		}
		if err := lctx.DecodeTokens(ctx, 0, 0, prompt); err != nil {
			return err
		}
		for pos := len(prompt); pos < len(prompt)+reply; pos++ {
			tok, err := sampler.Sample(lctx, -1)
			if err != nil {
				return err
			}
			if err := lctx.DecodeTokens(ctx, 0, pos, []llama.Token{tok}); err != nil {
				return err
			}
			if tokens.Add(1) == 1 {
				close(first)
			}
		}
	}
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func seconds(samples int) float64 { return float64(samples) / audio.PipelineRate }
