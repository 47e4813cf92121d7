package sphinx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/internal/wer"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modelstore"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/asr/asrtest"
	"github.com/parley-voice/parley/modules/asr/sphinx"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/modules/vad/silero"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func needPocketsphinx(t testing.TB) {
	t.Helper()
	hmm, _, _ := pocketsphinx.DefaultModel()
	if _, err := os.Stat(filepath.Join(hmm, "mdef")); err != nil {
		testenv.Missing(t, "the pocketsphinx en-us model", "install pocketsphinx-en-us; "+testenv.EnvFix)
	}
}

// finalPassConfig is the engine's default with the final pass for every utterance: its
// finals are exactly those of a decode of the utterance's audio in one piece.
func finalPassConfig() asr.PocketsphinxConfig {
	c := asr.DefaultPocketsphinxConfig()
	c.AdaptAfter = 0
	return c
}

// lateAdaptConfig is the engine's default, without early adaptation: the session's
// first utterance's final is the final pass's, which the streaming pass adapts from.
func lateAdaptConfig() asr.PocketsphinxConfig {
	c := asr.DefaultPocketsphinxConfig()
	c.EarlyAdapt = false
	return c
}

// earlyAdaptConfig is the default with early adaptation.
func earlyAdaptConfig() asr.PocketsphinxConfig {
	c := asr.DefaultPocketsphinxConfig()
	c.EarlyAdapt = true
	return c
}

// TestPocketsphinxEarlyAdapt: with early adaptation the session's first utterance's
// final becomes the streaming pass's own once AdaptAfter of it was fed, its partials
// and peek agree, and the next utterance's final is its own from the start; without
// it, the first utterance keeps the final pass.
func TestPocketsphinxEarlyAdapt(t *testing.T) {
	needPocketsphinx(t)
	ctx := context.Background()
	samples := asrtest.SharedAudio(t, "jfk.wav")[:3*audio.PipelineRate]
	hop := int(audio.DurationToSamples(asr.DefaultConfig().EffectiveHop(), audio.PipelineRate))
	adaptAfter := int(audio.DurationToSamples(asr.DefaultPocketsphinxConfig().AdaptAfter, audio.PipelineRate))
	for _, early := range []bool{true, false} {
		t.Run(fmt.Sprintf("early=%v", early), func(t *testing.T) {
			cfg := asr.DefaultPocketsphinxConfig()
			cfg.EarlyAdapt = early
			e := newEngine(t, cfg)
			if err := e.Start(ctx); err != nil {
				t.Fatal(err)
			}
			for from := 0; from < len(samples); from += hop {
				if err := e.Feed(ctx, samples[from:min(from+hop, len(samples))]); err != nil {
					t.Fatal(err)
				}
				// Its own once AdaptAfter of audio was fed.
				if want := early && from+hop >= adaptAfter; e.OwnFinal() != want {
					t.Fatalf("after %d samples fed, own final %v, want %v", from+hop, e.OwnFinal(), want)
				}
			}
			partial, err := e.Partial(ctx)
			if err != nil {
				t.Fatal(err)
			}
			final, err := e.Final(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if early && partial.Text() != final.Text() {
				t.Errorf("the adapted streaming pass's partial %q, its final %q", partial.Text(), final.Text())
			}
			if len(final.Words) < 4 {
				t.Errorf("final %q: want the first words of the recording", final.Text())
			}
			if err := e.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if !e.OwnFinal() {
				t.Error("the second utterance's final is not the streaming pass's own")
			}
			t.Logf("first utterance: %q", final.Text())
		})
	}
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

func TestPocketsphinxStreaming(t *testing.T) {
	needPocketsphinx(t)
	e, err := sphinx.New(finalPassConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ref, err := sphinx.New(finalPassConfig())
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
			got := listen(t, path, asr.DefaultConfig(), e, asrtest.PipelineOptions{}).ASR
			utts := asrtest.Contract(t, got)
			if len(utts) == 0 {
				t.Fatal("no utterance")
			}
			asrtest.CheckFinals(t, utts, asrtest.StreamAudio(t, path), ref)
			// Incremental: words are added before their utterance's end of turn.
			var adds, revokes, early int
			done := map[int]time.Duration{}
			for _, r := range got {
				if u, ok := r.Up.IU.Payload.(asr.Utterance); ok {
					done[u.ID] = r.At
				}
			}
			for _, r := range got {
				w, ok := r.Up.IU.Payload.(asr.Word)
				if !ok {
					continue
				}
				switch r.Up.Type {
				case iu.Add:
					adds++
					if r.At < done[w.Utterance]-time.Second/2 {
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

// TestPocketsphinxSpeculativeMatchesTurnEnd replays shared recordings through the real
// VAD and pocketsphinx: with speculation every turn commits a speculative final decode,
// and the utterances (text, word times, confidences) are exactly those of final decodes
// started at the end of turn. With the final pass for every utterance, those are the
// final pass's (a decode of the utterance's audio in one piece); with the default, the
// first utterance's, and later ones are the streaming pass's own finals, peeked at the
// pause.
func TestPocketsphinxSpeculativeMatchesTurnEnd(t *testing.T) {
	needPocketsphinx(t)
	files := []string{"goforward.wav", "austen-0880.wav", "jfk.wav", "v2j_what_time_is_it.wav"}
	if testing.Short() {
		files = []string{"goforward.wav", "jfk.wav"}
	}
	ref, err := sphinx.New(finalPassConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for _, mode := range []struct {
		name string
		cfg  asr.PocketsphinxConfig
	}{{"final-pass", finalPassConfig()}, {"adapted", lateAdaptConfig()}, {"early", earlyAdaptConfig()}} {
		for _, name := range files {
			if mode.name == "early" && name != "goforward.wav" && name != "jfk.wav" {
				continue // early adaptation differs from "adapted" in the first utterance only
			}
			t.Run(mode.name+"/"+name, func(t *testing.T) {
				path := testenv.SharedFile(t, "audio/"+name)
				var utts [2][]asr.Utterance
				var logs [2]*observer.ObservedLogs
				for i, speculative := range []bool{true, false} {
					e, err := sphinx.New(mode.cfg)
					if err != nil {
						t.Fatal(err)
					}
					cfg := asr.DefaultConfig()
					cfg.Speculative = speculative
					var log *zap.Logger
					log, logs[i] = asrtest.DebugLog()
					run := listen(t, path, cfg, e, asrtest.PipelineOptions{Log: log})
					e.Close()
					utts[i] = asrtest.Contract(t, run.ASR)
					if len(utts[i]) == 0 {
						t.Fatal("no utterance")
					}
				}
				if !reflect.DeepEqual(utts[0], utts[1]) {
					t.Fatalf("utterances with speculation\n%+v\nwithout\n%+v", utts[0], utts[1])
				}
				finalPassed := utts[0]
				switch mode.name {
				case "adapted":
					// Every recording here is longer than AdaptAfter: its first utterance
					// adapts the streaming pass.
					finalPassed = utts[0][:1]
				case "early":
					// The first utterance adapted within itself: no final is the final
					// pass's but a first utterance shorter than AdaptAfter.
					finalPassed = nil
				}
				asrtest.CheckFinals(t, finalPassed, asrtest.StreamAudio(t, path), ref)
				spec, plain := asrtest.Committed(logs[0]), asrtest.Committed(logs[1])
				if len(spec) != len(utts[0]) || slices.Contains(spec, false) {
					t.Errorf("with speculation, commits (speculative?) %v", spec)
				}
				if len(plain) != len(utts[1]) || slices.Contains(plain, true) {
					t.Errorf("without speculation, commits (speculative?) %v", plain)
				}
				d := asrtest.Dropped(logs[0])
				if name == "jfk.wav" && !slices.Contains(d, "speech resumed") {
					// Its last turn has two segments 0.5 s apart: the end of the first
					// starts a speculation that the second drops.
					t.Errorf("jfk: dropped speculations %q, want one dropped when speech resumed", d)
				}
				var text []string
				for _, u := range utts[0] {
					text = append(text, u.Text)
				}
				t.Logf("%d utterances %q; speculations dropped: %q", len(utts[0]), text, d)
			})
		}
	}
}

// newEngine returns an engine with cfg, closed when the test ends.
func newEngine(t *testing.T, cfg asr.PocketsphinxConfig) *sphinx.Engine {
	t.Helper()
	e, err := sphinx.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestPocketsphinxPeekFinal checks the engine's own finals: before the streaming pass
// has decoded AdaptAfter of audio an utterance's final is the final pass's, after it the
// streaming pass's; PeekFinal gives what Final gives, twice alike; and audio fed after a
// peek carries the utterance on to the hypotheses of a twin engine that never peeked.
func TestPocketsphinxPeekFinal(t *testing.T) {
	needPocketsphinx(t)
	ctx := context.Background()
	must := func(h asr.Hypothesis, err error) asr.Hypothesis {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	e, twin := newEngine(t, asr.DefaultPocketsphinxConfig()), newEngine(t, asr.DefaultPocketsphinxConfig())
	hop := int(audio.DurationToSamples(asr.DefaultConfig().EffectiveHop(), audio.PipelineRate))
	warm := asrtest.SharedAudio(t, "jfk.wav")[:2*audio.PipelineRate]
	for _, en := range []*sphinx.Engine{e, twin} {
		if err := en.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if en.OwnFinal() {
			t.Fatal("a fresh engine's final is its own: it has not adapted yet")
		}
		if err := en.Feed(ctx, warm); err != nil {
			t.Fatal(err)
		}
		must(en.Final(ctx))
	}
	for _, name := range []string{"goforward.wav", "v2j_what_time_is_it.wav", "cards-005.wav"} {
		samples := asrtest.SharedAudio(t, name)
		for _, en := range []*sphinx.Engine{e, twin} {
			if err := en.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if !en.OwnFinal() {
				t.Fatalf("%s: after 2 s of audio the final is still the final pass's", name)
			}
		}
		half := len(samples) / 2
		var peeks []asr.Hypothesis
		for from := 0; from < half; from += hop {
			to := min(from+hop, half)
			if err := e.Feed(ctx, samples[from:to]); err != nil {
				t.Fatal(err)
			}
			if err := twin.Feed(ctx, samples[from:to]); err != nil {
				t.Fatal(err)
			}
			if from%(3*hop) == 0 {
				// A pause every third hop, the speech going on after it.
				peeks = append(peeks, must(e.PeekFinal(ctx)))
				if again := must(e.PeekFinal(ctx)); !reflect.DeepEqual(again, peeks[len(peeks)-1]) {
					t.Errorf("%s: a second peek %q, the first %q", name, again.Text(), peeks[len(peeks)-1].Text())
				}
			}
		}
		for _, en := range []*sphinx.Engine{e, twin} {
			if err := en.Feed(ctx, samples[half:]); err != nil {
				t.Fatal(err)
			}
		}
		if got, tw := must(e.Partial(ctx)), must(twin.Partial(ctx)); !reflect.DeepEqual(got, tw) {
			t.Errorf("%s: partial after %d peeks %q, without %q", name, len(peeks), got.Text(), tw.Text())
		}
		peek := must(e.PeekFinal(ctx))
		final := must(e.Final(ctx))
		if !reflect.DeepEqual(peek, final) {
			t.Errorf("%s: PeekFinal %+v, then Final %+v", name, peek, final)
		}
		if tw := must(twin.Final(ctx)); !reflect.DeepEqual(final, tw) {
			t.Errorf("%s: final after peeks %+v, without %+v", name, final, tw)
		}
		if len(final.Words) == 0 || final.Words[0].Confidence == 0 {
			t.Errorf("%s: final %+v: want words with confidences", name, final)
		}
		t.Logf("%s: %d peeks, final %q", name, len(peeks), final.Text())
	}

	cfg := asr.DefaultPocketsphinxConfig()
	cfg.FinalPass = false
	streaming := newEngine(t, cfg)
	if err := streaming.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !streaming.OwnFinal() {
		t.Error("without the final pass every final is the streaming pass's own")
	}
}

// TestPocketsphinxFinalOf checks the engine's side decode: FinalOf gives exactly what
// Start, Feed, Final give (words, times, confidences), whether the streaming pass has an
// utterance open or not, and leaves the streaming pass exactly as a twin engine that
// never ran FinalOf.
func TestPocketsphinxFinalOf(t *testing.T) {
	needPocketsphinx(t)
	ctx := context.Background()
	ref, e, twin := newEngine(t, finalPassConfig()), newEngine(t, finalPassConfig()), newEngine(t, finalPassConfig())
	// e's side decoder is loaded ahead, as the pipeline does when it speculates: its
	// FinalOf during streaming must still give ref's words.
	if err := e.LoadSide(); err != nil {
		t.Fatal(err)
	}
	if err := e.LoadSide(); err != nil {
		t.Fatal("LoadSide twice:", err)
	}
	// Both streaming engines heard something before, so that their live cepstral mean
	// is not the initial one.
	warm := asrtest.SharedAudio(t, "jfk.wav")[:2*audio.PipelineRate]
	hop := int(audio.DurationToSamples(asr.DefaultConfig().EffectiveHop(), audio.PipelineRate))
	asrtest.StreamDecode(t, e, warm, hop)
	asrtest.StreamDecode(t, twin, warm, hop)
	must := func(h asr.Hypothesis, err error) asr.Hypothesis {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, name := range []string{"goforward.wav", "v2j_what_time_is_it.wav"} {
		samples := asrtest.SharedAudio(t, name)
		if err := ref.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := ref.Feed(ctx, samples); err != nil {
			t.Fatal(err)
		}
		want := must(ref.Final(ctx))
		if len(want.Words) == 0 {
			t.Fatalf("%s: nothing recognised", name)
		}
		half := len(samples) / 2
		for _, en := range []*sphinx.Engine{e, twin} {
			if err := en.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := en.Feed(ctx, samples[:half]); err != nil {
				t.Fatal(err)
			}
		}
		// On the side, while the streaming pass has half the recording.
		if got := must(e.FinalOf(ctx, samples)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: FinalOf during streaming\n%+v\nwant\n%+v", name, got, want)
		}
		if got, tw := must(e.Partial(ctx)), must(twin.Partial(ctx)); !reflect.DeepEqual(got, tw) {
			t.Errorf("%s: partial after FinalOf %q, without %q", name, got.Text(), tw.Text())
		}
		for _, en := range []*sphinx.Engine{e, twin} {
			if err := en.Feed(ctx, samples[half:]); err != nil {
				t.Fatal(err)
			}
		}
		if got, tw := must(e.Partial(ctx)), must(twin.Partial(ctx)); !reflect.DeepEqual(got, tw) {
			t.Errorf("%s: partial of the whole recording after FinalOf %q, without %q", name, got.Text(), tw.Text())
		}
		if got := must(e.Final(ctx)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Final after FinalOf %q, want %q", name, got.Text(), want.Text())
		}
		must(twin.Final(ctx))
		// Between utterances (no streaming utterance open).
		if got := must(e.FinalOf(ctx, samples)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: FinalOf between utterances\n%+v\nwant\n%+v", name, got, want)
		}
	}
	if h := must(e.FinalOf(ctx, nil)); len(h.Words) != 0 {
		t.Errorf("FinalOf(nothing) = %q", h.Text())
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.FinalOf(cancelled, warm); !errors.Is(err, context.Canceled) {
		t.Errorf("FinalOf with a cancelled context: %v", err)
	}

	cfg := finalPassConfig()
	cfg.FinalPass = false
	streaming := newEngine(t, cfg)
	if streaming.StatelessFinal() {
		t.Error("without the final pass the final hypothesis is stateful")
	}
	if _, err := streaming.FinalOf(ctx, warm); !errors.Is(err, asr.ErrStatefulFinal) {
		t.Errorf("FinalOf without the final pass: %v", err)
	}
}

// TestPocketsphinxWERMatchesCLI measures the word error rate of the pocketsphinx engine
// over every shared recording and checks that it is within one point of Debian's
// `pocketsphinx single` on the same audio (converted to 16 kHz mono 16-bit by sox for
// both, since the command reads only that).
func TestPocketsphinxWERMatchesCLI(t *testing.T) {
	needPocketsphinx(t)
	sox := testenv.Command(t, "sox", testenv.EnvFix)
	cli := testenv.Command(t, "pocketsphinx", testenv.EnvFix)
	dir := filepath.Join(testenv.SharedDir(t), "audio")
	ts, err := wer.LoadTranscripts(testenv.SharedFile(t, "audio/transcripts.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		ts = ts[:min(len(ts), 6)] // pocketsphinx runs at about half real time here
	}
	cfg := finalPassConfig()
	e, err := sphinx.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	hop := int(audio.DurationToSamples(asr.DefaultConfig().EffectiveHop(), audio.PipelineRate))
	tmp := t.TempDir()
	// The same search as the engine's: the CLI takes its JSON configuration's names with
	// a dash.
	var cliArgs []string
	for k, v := range cfg.DecoderOptions() {
		cliArgs = append(cliArgs, "-"+k, fmt.Sprint(v))
	}
	var ours, theirs wer.Result
	for _, tr := range ts {
		conv := filepath.Join(tmp, filepath.Base(tr.File))
		if out, err := exec.Command(sox, filepath.Join(dir, tr.File), "-r", "16000", "-c", "1", "-b", "16", "-e", "signed-integer", conv).CombinedOutput(); err != nil {
			t.Fatalf("sox %s: %v\n%s", tr.File, err, out)
		}
		cmd := exec.Command(cli, append(cliArgs, "single", conv)...)
		cmd.Dir = tmp
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pocketsphinx single %s: %v", tr.File, err)
		}
		var res struct {
			T string `json:"t"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
			t.Fatalf("pocketsphinx single %s printed %q: %v", tr.File, out, err)
		}
		fr, err := audio.DecodeWAVFile(conv)
		if err != nil {
			t.Fatal(err)
		}
		got := asrtest.StreamDecode(t, e, fr.Samples, hop)
		o, c := wer.Compare(tr.Text, got), wer.Compare(tr.Text, res.T)
		ours, theirs = ours.Add(o), theirs.Add(c)
		t.Logf("%-50s engine %5.1f%% %q | cli %5.1f%% %q", tr.File, 100*o.Rate(), got, 100*c.Rate(), res.T)
	}
	t.Logf("total: engine %v; pocketsphinx single %v", ours, theirs)
	if d := 100 * (ours.Rate() - theirs.Rate()); d > 1 || d < -1 {
		t.Errorf("engine WER %.2f%% is %.2f points from pocketsphinx single's %.2f%%", 100*ours.Rate(), d, 100*theirs.Rate())
	}
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

func BenchmarkPocketsphinxStreaming(b *testing.B) {
	needPocketsphinx(b)
	for _, final := range []bool{true, false} {
		name := "final-pass"
		if !final {
			name = "streaming-only"
		}
		b.Run(name, func(b *testing.B) {
			cfg := asr.DefaultPocketsphinxConfig()
			cfg.FinalPass = final
			e, err := sphinx.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			benchStreaming(b, e, asrtest.SharedAudio(b, "jfk.wav"), int(audio.DurationToSamples(asr.DefaultConfig().EffectiveHop(), audio.PipelineRate)))
		})
	}
}

// BenchmarkFinalLatency plays shared recordings in real time through the real VAD and
// the ASR with pocketsphinx (final pass on) and reports how long after the end of turn
// each utterance is committed (eot-to-utterance-ms: the mean over the turns, measured
// where the ASR's and the turn-end module's consumers receive them), with speculative final
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
				pe, err := sphinx.New(asr.DefaultPocketsphinxConfig())
				if err != nil {
					b.Fatal(err)
				}
				defer pe.Close()
				if err := pe.LoadSide(); err != nil { // not inside the measurement
					b.Fatal(err)
				}
				e := &timedEngine{Engine: pe}
				var eng asr.Engine = e
				if mode == "engine-final" {
					eng = plainEngine{e}
				}
				cfg := asr.DefaultConfig()
				cfg.Speculative = mode == "speculative"
				var latency time.Duration
				turns := 0
				for b.Loop() {
					run := listen(b, path, cfg, eng, asrtest.PipelineOptions{RealClock: true})
					var eots, utts []time.Time
					for _, r := range run.TurnEnd {
						if _, ok := r.Up.IU.Payload.(vad.EndOfTurn); ok && r.Up.Type == iu.Add {
							eots = append(eots, r.When)
						}
					}
					for _, r := range run.ASR {
						if _, ok := r.Up.IU.Payload.(asr.Utterance); ok && r.Up.Type == iu.Add {
							utts = append(utts, r.When)
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

// timedEngine measures the FinalOf calls of a pocketsphinx engine. Only the worker that
// holds the engine writes the total (the module runs one job at a time, each started
// after the previous one's result arrived); it is read after the network ran.
type timedEngine struct {
	*sphinx.Engine
	finalOf time.Duration
}

func (e *timedEngine) FinalOf(ctx context.Context, samples []float32) (asr.Hypothesis, error) {
	start := time.Now()
	h, err := e.Engine.FinalOf(ctx, samples)
	e.finalOf += time.Since(start)
	return h, err
}

// plainEngine is an Engine and nothing more: the module cannot see its FinalOf.
type plainEngine struct{ asr.Engine }
