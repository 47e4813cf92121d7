package asr

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/vad"
	"go.uber.org/zap"
)

const tail = time.Second // silence after each recording, so the last turn ends by silence

func vadConfig(t testing.TB) vad.Config {
	t.Helper()
	if err := ggml.LoadBackends(); err != nil {
		testenv.Missing(t, "a ggml CPU backend", testenv.EnvFix)
	}
	whisper.SetLogLevel(whisper.LogError)
	c := vad.DefaultConfig()
	c.Model = testenv.SharedFile(t, "models/"+vad.DefaultModelFile)
	return c
}

func needPocketsphinx(t testing.TB) {
	t.Helper()
	hmm, _, _ := pocketsphinx.DefaultModel()
	if _, err := os.Stat(filepath.Join(hmm, "mdef")); err != nil {
		testenv.Missing(t, "the pocketsphinx en-us model", "install pocketsphinx-en-us; "+testenv.EnvFix)
	}
}

func whisperConfig(t testing.TB) WhisperConfig {
	t.Helper()
	c := DefaultWhisperConfig()
	c.Model = testenv.SharedFile(t, "models/ggml-tiny.en-for-tests.bin")
	c.Threads = 2
	c.Fallback = false // the weightless model fails every quality check; retries only cost time
	return c
}

// pipeline runs source → vad → asr on a virtual clock, the way the agent listens, and
// returns what the ASR sent.
func pipeline(t *testing.T, path string, cfg Config, e Engine) []received {
	t.Helper()
	return runPipeline(t, path, cfg, e, pipelineOptions{}).asr
}

type pipelineOptions struct {
	realClock bool        // play the recording in real time instead of on a virtual clock
	log       *zap.Logger // the network's logger (none when nil)
}

// pipelineRun is what the consumers of a pipeline saw.
type pipelineRun struct {
	asr, vad []received
}

// runPipeline runs source → vad → asr and returns what the ASR and the VAD sent.
func runPipeline(t testing.TB, path string, cfg Config, e Engine, o pipelineOptions) pipelineRun {
	t.Helper()
	var opts []iu.Option
	if !o.realClock {
		clk := clock.NewVirtual(virtualStart)
		defer clk.Close()
		opts = append(opts, iu.WithClock(clk))
	}
	if o.log != nil {
		opts = append(opts, iu.WithLogger(o.log))
	}
	net := iu.NewNetwork(opts...)
	src, err := source.NewFile("source", path, source.Config{TailSilence: tail})
	if err != nil {
		t.Fatal(err)
	}
	v, err := vad.Open("vad", vadConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	m, err := New("asr", cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	var run pipelineRun
	if err := net.Add(src, v, m, collector("sink", &run.asr), collector("vad-sink", &run.vad)); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"source", "vad"}, {"source", "asr"}, {"vad", "asr"}, {"asr", "sink"}, {"vad", "vad-sink"}} {
		if err := net.ConnectNames(c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return run
}

// streamAudio returns the audio a source plays for path: 16 kHz mono plus the tail.
func streamAudio(t *testing.T, path string) []float32 {
	t.Helper()
	f, err := audio.DecodeWAVFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f, err = audio.ToPipeline(f); err != nil {
		t.Fatal(err)
	}
	return append(f.Samples, make([]float32, audio.DurationToSamples(tail, audio.PipelineRate))...)
}

// decodeDirect decodes samples as one utterance in one go.
func decodeDirect(t *testing.T, e Engine, samples []float32) string {
	t.Helper()
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Feed(ctx, samples); err != nil {
		t.Fatal(err)
	}
	h, err := e.Final(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h.Text()
}

// checkFinals checks that every utterance's text is what the engine decodes from the
// utterance's audio in one go.
func checkFinals(t *testing.T, utts []Utterance, samples []float32, e Engine) {
	t.Helper()
	for _, u := range utts {
		from := audio.DurationToSamples(u.AudioStart, audio.PipelineRate)
		to := audio.DurationToSamples(u.AudioEnd, audio.PipelineRate)
		if from < 0 || to > int64(len(samples)) || to <= from {
			t.Fatalf("utterance %d audio %v–%v outside the stream", u.ID, u.AudioStart, u.AudioEnd)
		}
		if want := decodeDirect(t, e, samples[from:to]); u.Text != want {
			t.Errorf("utterance %d: streamed final %q, the engine's final decode of the same audio %q", u.ID, u.Text, want)
		}
	}
}

func TestPocketsphinxStreaming(t *testing.T) {
	needPocketsphinx(t)
	e, err := NewPocketsphinxEngine(DefaultPocketsphinxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ref, err := NewPocketsphinxEngine(DefaultPocketsphinxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	files := []string{"goforward.wav", "austen-0880.wav", "jfk.wav", "leopard_test.wav", "v2j_what_time_is_it.wav"}
	if testing.Short() {
		files = files[:2]
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			path := testenv.SharedFile(t, "audio/"+name)
			got := pipeline(t, path, DefaultConfig(), e)
			utts := contract(t, got)
			if len(utts) == 0 {
				t.Fatal("no utterance")
			}
			checkFinals(t, utts, streamAudio(t, path), ref)
			// Incremental: words are added before their utterance's end of turn.
			var adds, revokes, early int
			done := map[int]time.Duration{}
			for _, r := range got {
				if u, ok := r.up.IU.Payload.(Utterance); ok {
					done[u.ID] = r.at
				}
			}
			for _, r := range got {
				w, ok := r.up.IU.Payload.(Word)
				if !ok {
					continue
				}
				switch r.up.Type {
				case iu.Add:
					adds++
					if r.at < done[w.Utterance]-time.Second/2 {
						early++
					}
				case iu.Revoke:
					revokes++
				}
			}
			var text []string
			for _, u := range utts {
				text = append(text, u.Text)
			}
			t.Logf("%d utterances %q; %d words added (%d well before the end of turn), %d revoked", len(utts), text, adds, early, revokes)
			if early == 0 {
				t.Error("no word was reported before the end of turn")
			}
		})
	}
}

// TestWhisperStreaming holds the whisper engine to the same streaming contract with
// whisper.cpp's weightless test model (which recognises nothing).
func TestWhisperStreaming(t *testing.T) {
	e, err := NewWhisperEngine(whisperConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cfg := DefaultConfig()
	cfg.Engine = "whisper"
	cfg.Hop = time.Second // each decode of the test model takes seconds on a shared CPU
	path := testenv.SharedFile(t, "audio/goforward.wav")
	utts := contract(t, pipeline(t, path, cfg, e))
	if len(utts) != 1 {
		t.Fatalf("%d utterances, want 1", len(utts))
	}
	if utts[0].Text != "" || len(utts[0].Words) != 0 {
		t.Fatalf("the test model recognised %q", utts[0].Text)
	}
	if utts[0].Start <= utts[0].AudioStart || utts[0].End >= utts[0].AudioEnd {
		t.Errorf("speech %v–%v not inside the decoded audio %v–%v", utts[0].Start, utts[0].End, utts[0].AudioStart, utts[0].AudioEnd)
	}
	checkFinals(t, utts, streamAudio(t, path), e)
}

func TestOpenEngines(t *testing.T) {
	needPocketsphinx(t)
	cfg := DefaultConfig()
	m, err := Open("asr", cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	cfg.Engine = "whisper"
	cfg.Whisper = whisperConfig(t)
	m, err = Open("asr", cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	cfg.Whisper.Model = ""
	if _, err := Open("asr", cfg); err == nil {
		t.Fatal("whisper without a model opened")
	}
	cfg.Whisper.Model = filepath.Join(t.TempDir(), "missing.bin")
	if _, err := Open("asr", cfg); err == nil {
		t.Fatal("whisper with a missing model opened")
	}
}
