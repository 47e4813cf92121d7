// Package asrtest holds what the tests of the ASR module and of its engines share: a
// collector of what the module sends, the checks of its output contract, and the
// pipelines and decoders that drive an engine the way the module does. It is pure Go;
// the engine tests bring their engines (and the VAD's scorer) along.
package asrtest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/turnend"
	"github.com/parley-voice/parley/modules/vad"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// VirtualStart is where the tests' virtual clocks start.
var VirtualStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Tail is the silence a pipeline plays after each recording, so that its last turn ends
// by silence.
const Tail = time.Second

// Received is an update as a consumer saw it, with the network clock's reading and its
// offset from the consumer's start.
type Received struct {
	At   time.Duration
	When time.Time
	Up   iu.Update
}

// Collector records everything it receives; the slice is read after the network ran.
func Collector(name string, out *[]Received) iu.Module {
	return iu.ModuleFunc{ModuleName: name, Fn: func(ctx context.Context, p *iu.Ports) error {
		start := p.Now()
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case iu.EventMessage:
				now := p.Now()
				for _, up := range ev.Message.Updates {
					*out = append(*out, Received{At: now.Sub(start), When: now, Up: up})
				}
			case iu.EventInputDone:
				return nil
			}
		}
	}}
}

// Contract checks the ASR's output against the rules consumers rely on and returns the
// utterances in order:
//   - every word is ADDed once, then possibly UPDATEd, then COMMITted or REVOKEd, and
//     every word is finished by the end;
//   - no revoked word is ever committed;
//   - an utterance is ADDed and COMMITted at once, grounded in exactly its committed
//     words, and its text is their texts joined;
//   - words are grounded in audio IUs;
//   - an utterance's Decoded IU is ADDed once, then UPDATEd, and COMMITted with the
//     utterance (or left open when the input ended first).
func Contract(t testing.TB, got []Received) []asr.Utterance {
	t.Helper()
	state := map[iu.ID]iu.UpdateType{}
	var committed []iu.IU // words committed since the last utterance
	var utts []asr.Utterance
	decoded := map[iu.ID]iu.UpdateType{}
	for i, r := range got {
		u := r.Up.IU
		switch pl := u.Payload.(type) {
		case asr.Decoded:
			prev, seen := decoded[u.ID]
			switch {
			case r.Up.Type == iu.Add && seen, r.Up.Type != iu.Add && !seen, seen && prev == iu.Commit, r.Up.Type == iu.Revoke:
				t.Fatalf("update %d: %v of decoded %s (utterance %d) after %v", i, r.Up.Type, u.ID, pl.Utterance, prev)
			}
			decoded[u.ID] = r.Up.Type
		case asr.Word:
			prev, seen := state[u.ID]
			switch r.Up.Type {
			case iu.Add:
				if seen {
					t.Fatalf("update %d: word %s added twice", i, u.ID)
				}
				if len(u.GroundedIn) == 0 {
					t.Errorf("update %d: word %q grounded in nothing", i, pl.Text)
				}
			case iu.UpdatePayload:
				if !seen || prev == iu.Commit || prev == iu.Revoke {
					t.Fatalf("update %d: update of word %s after %v", i, u.ID, prev)
				}
			case iu.Commit:
				if prev == iu.Revoke {
					t.Fatalf("update %d: revoked word %s %q committed", i, u.ID, pl.Text)
				}
				if !seen || prev == iu.Commit {
					t.Fatalf("update %d: commit of word %s after %v", i, u.ID, prev)
				}
				committed = append(committed, u)
			case iu.Revoke:
				if !seen || prev == iu.Commit || prev == iu.Revoke {
					t.Fatalf("update %d: revoke of word %s after %v", i, u.ID, prev)
				}
			}
			state[u.ID] = r.Up.Type
		case asr.Utterance:
			if r.Up.Type == iu.Add {
				if i+1 >= len(got) || got[i+1].Up.Type != iu.Commit || got[i+1].Up.IU.ID != u.ID {
					t.Fatalf("update %d: utterance %d not committed at once", i, pl.ID)
				}
				ids := make([]iu.ID, len(committed))
				var words []string
				for j, c := range committed {
					ids[j] = c.ID
					w := c.Payload.(asr.Word)
					words = append(words, w.Text)
					if w.Utterance != pl.ID {
						t.Errorf("word %q of utterance %d says utterance %d", w.Text, pl.ID, w.Utterance)
					}
				}
				if !slices.Equal(u.GroundedIn, ids) {
					t.Errorf("utterance %d grounded in %v, committed words %v", pl.ID, u.GroundedIn, ids)
				}
				if pl.Text != strings.Join(words, " ") || len(pl.Words) != len(committed) {
					t.Errorf("utterance %d text %q, committed words %q", pl.ID, pl.Text, words)
				}
				utts = append(utts, pl)
				committed = nil
			}
		default:
			t.Fatalf("update %d: the ASR sent a %s IU", i, u.Payload.Kind())
		}
	}
	for id, st := range state {
		if st != iu.Commit && st != iu.Revoke {
			t.Errorf("word %s left open (last %v)", id, st)
		}
	}
	if len(committed) > 0 {
		t.Errorf("%d words committed without an utterance", len(committed))
	}
	return utts
}

// Trace renders the word updates as "add a", "revoke b", ... for comparison.
func Trace(got []Received) []string {
	var out []string
	for _, r := range got {
		switch pl := r.Up.IU.Payload.(type) {
		case asr.Word:
			out = append(out, r.Up.Type.String()+" "+pl.Text)
		case asr.Utterance:
			if r.Up.Type == iu.Add {
				out = append(out, "utterance "+pl.Text)
			}
		}
	}
	return out
}

// DebugLog returns a logger that keeps every entry for the test to read.
func DebugLog() (*zap.Logger, *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return zap.New(core), logs
}

// Committed returns, per committed utterance, whether its final decode was speculative.
func Committed(logs *observer.ObservedLogs) []bool {
	var out []bool
	for _, e := range logs.FilterMessage("utterance committed").All() {
		out = append(out, e.ContextMap()["speculative"].(bool))
	}
	return out
}

// Dropped returns why speculative final decodes were dropped.
func Dropped(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.FilterMessage("speculative final dropped").All() {
		out = append(out, e.ContextMap()["why"].(string))
	}
	return out
}

// PipelineOptions tune RunPipeline.
type PipelineOptions struct {
	RealClock bool        // play the recording in real time instead of on a virtual clock
	Log       *zap.Logger // the network's logger (none when nil)
}

// PipelineRun is what the consumers of a pipeline saw.
type PipelineRun struct {
	ASR, VAD, TurnEnd []Received
}

// RunPipeline runs source → vad → turn-end → asr on path, the way the agent listens
// (the turn ends after the VAD's end_of_turn of silence), with the VAD scoring with
// scorer under vadCfg and the ASR recognising with e, and returns what the ASR, the VAD
// and the turn-end module sent.
func RunPipeline(t testing.TB, path string, vadCfg vad.Config, scorer vad.Scorer, cfg asr.Config, e asr.Engine, o PipelineOptions) PipelineRun {
	t.Helper()
	var opts []iu.Option
	if !o.RealClock {
		clk := clock.NewVirtual(VirtualStart)
		defer clk.Close()
		opts = append(opts, iu.WithClock(clk))
	}
	if o.Log != nil {
		opts = append(opts, iu.WithLogger(o.Log))
	}
	net := iu.NewNetwork(opts...)
	src, err := source.NewFile("source", path, source.Config{TailSilence: Tail})
	if err != nil {
		t.Fatal(err)
	}
	v, err := vad.New("vad", vadCfg, scorer)
	if err != nil {
		t.Fatal(err)
	}
	te := turnend.New("turn-end", turnend.Silence{After: v.HeardSilence(vadCfg.EndOfTurn)}, turnend.Waits{})
	m, err := asr.New("asr", cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	var run PipelineRun
	if err := net.Add(src, v, te, m, Collector("sink", &run.ASR), Collector("vad-sink", &run.VAD), Collector("turn-end-sink", &run.TurnEnd)); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"source", "vad"}, {"source", "asr"}, {"vad", "asr"}, {"asr", "sink"}, {"vad", "vad-sink"},
		{"source", "turn-end"}, {"vad", "turn-end"}, {"turn-end", "asr"}, {"turn-end", "turn-end-sink"}} {
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

// SharedAudio returns a shared recording (shared/audio/name) at 16 kHz mono.
func SharedAudio(t testing.TB, name string) []float32 {
	t.Helper()
	f, err := audio.DecodeWAVFile(testenv.SharedFile(t, "audio/"+name))
	if err != nil {
		t.Fatal(err)
	}
	if f, err = audio.ToPipeline(f); err != nil {
		t.Fatal(err)
	}
	return f.Samples
}

// StreamAudio returns the audio a pipeline's source plays for path: 16 kHz mono plus
// the Tail.
func StreamAudio(t testing.TB, path string) []float32 {
	t.Helper()
	f, err := audio.DecodeWAVFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f, err = audio.ToPipeline(f); err != nil {
		t.Fatal(err)
	}
	return append(f.Samples, make([]float32, audio.DurationToSamples(Tail, audio.PipelineRate))...)
}

// DecodeDirect decodes samples as one utterance in one go.
func DecodeDirect(t testing.TB, e asr.Engine, samples []float32) string {
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

// CheckFinals checks that every utterance's text is what the engine decodes from the
// utterance's audio in one go.
func CheckFinals(t testing.TB, utts []asr.Utterance, samples []float32, e asr.Engine) {
	t.Helper()
	for _, u := range utts {
		from := audio.DurationToSamples(u.AudioStart, audio.PipelineRate)
		to := audio.DurationToSamples(u.AudioEnd, audio.PipelineRate)
		if from < 0 || to > int64(len(samples)) || to <= from {
			t.Fatalf("utterance %d audio %v–%v outside the stream", u.ID, u.AudioStart, u.AudioEnd)
		}
		if want := DecodeDirect(t, e, samples[from:to]); u.Text != want {
			t.Errorf("utterance %d: streamed final %q, the engine's final decode of the same audio %q", u.ID, u.Text, want)
		}
	}
}

// StreamDecode feeds samples to e in 20 ms pieces as one utterance, asking for a partial
// hypothesis every hop samples, as the module does, and returns the final text.
func StreamDecode(t testing.TB, e asr.Engine, samples []float32, hop int) string {
	t.Helper()
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const piece = 320
	since := 0
	for i := 0; i < len(samples); i += piece {
		chunk := samples[i:min(i+piece, len(samples))]
		if err := e.Feed(ctx, chunk); err != nil {
			t.Fatal(err)
		}
		if since += len(chunk); since >= hop {
			since = 0
			if _, err := e.Partial(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, err := e.Final(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h.Text()
}
