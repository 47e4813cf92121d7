package whispercpp

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modelstore"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/asr/asrtest"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/modules/vad/silero"
)

func whisperConfig(t testing.TB) asr.WhisperConfig {
	t.Helper()
	c := asr.DefaultWhisperConfig()
	c.Model = testenv.SharedFile(t, "models/ggml-tiny.en-for-tests.bin")
	c.Threads = 2
	c.Fallback = false // the weightless model fails every quality check; retries only cost time
	return c
}

// listen runs source → vad (Silero) → asr on path, the way the agent listens.
func listen(t testing.TB, path string, cfg asr.Config, e asr.Engine, o asrtest.PipelineOptions) asrtest.PipelineRun {
	t.Helper()
	if err := ggml.LoadBackends(); err != nil {
		testenv.Missing(t, "a ggml CPU backend", testenv.EnvFix)
	}
	whisper.SetLogger(whisper.LogNone, nil)
	vc := vad.DefaultConfig()
	vc.Model = testenv.SharedFile(t, "models/"+modelstore.DefaultFile(modelstore.KindVAD))
	scorer, err := silero.Open(vc)
	if err != nil {
		t.Fatal(err)
	}
	defer scorer.Close()
	return asrtest.RunPipeline(t, path, vc, scorer, cfg, e, o)
}

// benchStreaming decodes samples as one utterance the way the ASR module drives an
// engine (20 ms pieces, a partial hypothesis every hop, the final decode) and reports
// the real-time factor: processing time per second of audio.
func benchStreaming(b *testing.B, e asr.Engine, samples []float32, hop int) {
	b.ResetTimer()
	for b.Loop() {
		asrtest.StreamDecode(b, e, samples, hop)
	}
	audioSec := float64(len(samples)) / audio.PipelineRate * float64(b.N)
	b.ReportMetric(b.Elapsed().Seconds()/audioSec, "rtf")
}

// TestWhisperStreaming holds the whisper engine to the same streaming contract with
// whisper.cpp's weightless test model (which recognises nothing).
func TestWhisperStreaming(t *testing.T) {
	e, err := New(whisperConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cfg := asr.DefaultConfig()
	cfg.Engine = "whisper"
	cfg.Hop = time.Second // each decode of the test model takes seconds on a shared CPU
	path := testenv.SharedFile(t, "audio/goforward.wav")
	utts := asrtest.Contract(t, listen(t, path, cfg, e, asrtest.PipelineOptions{}).ASR)
	if len(utts) != 1 {
		t.Fatalf("%d utterances, want 1", len(utts))
	}
	if utts[0].Text != "" || len(utts[0].Words) != 0 {
		t.Fatalf("the test model recognised %q", utts[0].Text)
	}
	if utts[0].Start <= utts[0].AudioStart || utts[0].End >= utts[0].AudioEnd {
		t.Errorf("speech %v–%v not inside the decoded audio %v–%v", utts[0].Start, utts[0].End, utts[0].AudioStart, utts[0].AudioEnd)
	}
	asrtest.CheckFinals(t, utts, asrtest.StreamAudio(t, path), e)
}

// BenchmarkWhisperStreaming re-decodes a growing utterance (goforward.wav, 2.8 s) every
// hop with whisper.cpp's weightless tiny.en test model, whose compute matches a real
// tiny model's encoder (a real model also spends time decoding tokens).
func BenchmarkWhisperStreaming(b *testing.B) {
	for _, hop := range []string{"300ms", "1s"} {
		b.Run("hop-"+hop, func(b *testing.B) {
			e, err := New(whisperConfig(b))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			n := 300 * audio.PipelineRate / 1000
			if hop == "1s" {
				n = audio.PipelineRate
			}
			benchStreaming(b, e, asrtest.SharedAudio(b, "goforward.wav"), n)
		})
	}
}

func TestIsAnnotation(t *testing.T) {
	for w, want := range map[string]bool{
		"[BLANK_AUDIO]": true, "(music)": true, "*laughs*": true, "[": false, "hello": false, "(2)": true, "it's": false, "[x": false,
	} {
		if got := isAnnotation(w); got != want {
			t.Errorf("isAnnotation(%q) = %v", w, got)
		}
	}
}

// TestDecodeGivenUpOn gives up on a partial decode while libwhisper is in it (the ASR
// module does so at the user's pause): the decode returns its context's error, and the
// engine goes on as if it had not run: the next utterance streams and decodes, and the
// final of the same audio is what it was before.
func TestDecodeGivenUpOn(t *testing.T) {
	e, err := New(whisperConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	samples := asrtest.SharedAudio(t, "goforward.wav")
	want, err := e.FinalOf(context.Background(), samples)
	if err != nil {
		t.Fatal(err)
	}
	// utterance starts an utterance of samples.
	utterance := func(ctx context.Context) {
		t.Helper()
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.Feed(ctx, samples); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		utterance(ctx)
		// The weightless model's decode of 2.8 s takes hundreds of milliseconds.
		stop := time.AfterFunc(10*time.Millisecond, cancel)
		if _, err := e.Partial(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: the partial given up on returned %v, want context.Canceled", round, err)
		}
		stop.Stop()
		bg := context.Background()
		utterance(bg)
		if _, err := e.Partial(bg); err != nil {
			t.Fatalf("round %d: the partial after it: %v", round, err)
		}
		got, err := e.FinalOf(bg, samples)
		if err != nil {
			t.Fatal(err)
		}
		if got.Text() != want.Text() {
			t.Errorf("round %d: final %q after a decode given up on, %q before", round, got.Text(), want.Text())
		}
	}
}
