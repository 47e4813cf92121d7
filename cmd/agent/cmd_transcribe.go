package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/parley-voice/parley/modelstore"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/turnend"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/modules/vad/silero"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
)

func transcribeCommand() command {
	return command{
		Name:    "transcribe",
		Summary: "recognise a WAV file incrementally: print the ADD/REVOKE/COMMIT word stream and the final text",
		Run:     runTranscribe,
	}
}

// hearingFlags are the flags of the listening pipeline (source → vad → asr) that
// transcribe and wer share.
type hearingFlags struct {
	vadCfg   vad.Config
	asrCfg   asr.Config
	realtime bool
}

func (h *hearingFlags) register(a *app, fs *flag.FlagSet) {
	h.vadCfg = vad.DefaultConfig()
	h.vadCfg.Model = a.paths.ModelFile(modelstore.DefaultFile(modelstore.KindVAD))
	h.asrCfg = asr.DefaultConfig()
	h.asrCfg.Engine = pipeline.DefaultEngine(pipeline.KeyASREngine)
	if m, ok := modelstore.Builtin().Default(modelstore.KindASR); ok {
		h.asrCfg.Whisper.Model = filepath.Join(a.paths.Models, m.File)
	}
	fs.StringVar(&h.asrCfg.Engine, "engine", h.asrCfg.Engine, "recogniser: pocketsphinx or whisper")
	fs.StringVar(&h.asrCfg.Whisper.Model, "model", h.asrCfg.Whisper.Model, "whisper model file (--engine whisper)")
	fs.IntVar(&h.asrCfg.Whisper.Threads, "threads", h.asrCfg.Whisper.Threads, "whisper decoding threads (0: min(4, CPUs))")
	fs.StringVar(&h.asrCfg.Whisper.Language, "language", h.asrCfg.Whisper.Language, "whisper language code, or auto")
	fs.StringVar(&h.asrCfg.Whisper.Prompt, "prompt", h.asrCfg.Whisper.Prompt, "whisper initial prompt")
	fs.StringVar(&h.asrCfg.Pocketsphinx.HMM, "ps-hmm", "", "pocketsphinx acoustic model directory (default: the en-us model)")
	fs.StringVar(&h.asrCfg.Pocketsphinx.LM, "ps-lm", "", "pocketsphinx language model (default: the en-us model)")
	fs.StringVar(&h.asrCfg.Pocketsphinx.Dict, "ps-dict", "", "pocketsphinx dictionary (default: the en-us model)")
	fs.BoolVar(&h.asrCfg.Pocketsphinx.FinalPass, "ps-final-pass", h.asrCfg.Pocketsphinx.FinalPass, "pocketsphinx: decode each utterance once more, whole, at the end of the turn (as pocketsphinx single does)")
	fs.DurationVar(&h.asrCfg.Pocketsphinx.AdaptAfter, "ps-adapt-after", h.asrCfg.Pocketsphinx.AdaptAfter, "pocketsphinx: end the final pass once the streaming pass has decoded this much audio (0: final pass for every utterance)")
	fs.BoolVar(&h.asrCfg.Pocketsphinx.FastOwnFinals, "ps-fast-own-finals", h.asrCfg.Pocketsphinx.FastOwnFinals, "pocketsphinx: the streaming pass's own finals leave out the fwdflat and bestpath passes")
	fs.DurationVar(&h.asrCfg.Hop, "hop", h.asrCfg.Hop, "new audio between partial hypotheses (0: the engine's, 100ms pocketsphinx, 300ms whisper)")
	fs.DurationVar(&h.asrCfg.Trailing, "trailing", h.asrCfg.Trailing, "audio after the speech that the final decode includes")
	fs.IntVar(&h.asrCfg.Agreement, "agreement", h.asrCfg.Agreement, "hypotheses that must agree before a word is reported")
	fs.BoolVar(&h.asrCfg.EmitUnstable, "unstable", false, "also report words local agreement has not confirmed yet")
	h.registerVAD(fs)
	fs.BoolVar(&h.realtime, "realtime", false, "play the file in real time (default: as fast as possible on a virtual clock)")
}

// registerVAD adds the VAD's flags (shared with agent vad).
func (h *hearingFlags) registerVAD(fs *flag.FlagSet) {
	c := &h.vadCfg
	fs.StringVar(&c.Model, "vad-model", c.Model, "Silero VAD model (whisper.cpp ggml format)")
	thr := float64(c.Threshold)
	fs.Func("threshold", fmt.Sprintf("speech probability that starts speech (default %g)", thr), floatFlag(&c.Threshold))
	fs.Func("neg-threshold", "probability below which silence starts (default: threshold-0.15)", floatFlag(&c.NegThreshold))
	fs.DurationVar(&c.MinSpeech, "min-speech", c.MinSpeech, "shortest speech that counts")
	fs.DurationVar(&c.MinSilence, "min-silence", c.MinSilence, "silence that ends a segment")
	fs.DurationVar(&c.SpeechPad, "pad", c.SpeechPad, "padding added before and after each segment")
	fs.DurationVar(&c.MergeGap, "merge-gap", c.MergeGap, "segments closer than this are merged")
	fs.DurationVar(&c.EndOfTurn, "eot", c.EndOfTurn, "silence after speech that ends the user's turn")
}

func floatFlag(dst *float32) func(string) error {
	return func(s string) error {
		var v float64
		if _, err := fmt.Sscan(s, &v); err != nil {
			return fmt.Errorf("not a number: %q", s)
		}
		*dst = float32(v)
		return nil
	}
}

// hearing is the listening half of the agent: a reusable VAD scorer and ASR engine,
// with a network per file.
type hearing struct {
	flags  *hearingFlags
	log    *zap.Logger
	scorer *whisper.VAD
	engine pipeline.ASREngine
}

func (h *hearingFlags) validate(withASR bool) error {
	if err := h.vadCfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if !withASR {
		return nil
	}
	if err := h.asrCfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if _, err := pipeline.FindEngine(pipeline.KeyASREngine, h.asrCfg.Engine); err != nil {
		return usageErrorf("--%v", err)
	}
	return nil
}

// openHearing loads the VAD model and, when withASR, the recogniser.
func openHearing(a *app, f *hearingFlags, withASR bool) (*hearing, error) {
	if err := f.validate(withASR); err != nil {
		return nil, err
	}
	if err := ggml.LoadBackends(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(f.vadCfg.Model); err != nil {
		return nil, fmt.Errorf("VAD model: %w (agent models pull silero-vad, or --vad-model)", err)
	}
	scorer, err := silero.Open(f.vadCfg)
	if err != nil {
		return nil, err
	}
	h := &hearing{flags: f, log: a.log, scorer: scorer}
	if !withASR {
		return h, nil
	}
	// Engines that read a model file: say how to get it rather than fail to load it.
	eng, _ := pipeline.FindEngine(pipeline.KeyASREngine, f.asrCfg.Engine)
	for _, n := range eng.Needs(pipeline.Config{ASR: f.asrCfg}) {
		if _, err := os.Stat(n.Path); n.Model && err != nil {
			scorer.Close()
			return nil, fmt.Errorf("%s model: %w (agent models pull, or --model)", n.What, err)
		}
	}
	if h.engine, err = pipeline.OpenASREngine(f.asrCfg); err != nil {
		scorer.Close()
		return nil, err
	}
	return h, nil
}

func (h *hearing) Close() error {
	var errs []error
	if h.engine != nil {
		errs = append(errs, h.engine.Close())
	}
	errs = append(errs, h.scorer.Close())
	return errors.Join(errs...)
}

// run plays path through source → vad → turn-end (→ asr when the engine is open) and
// hands every update the recogniser sends to sink, on sink's own goroutine (without a
// recogniser, every update of the VAD and the turn-end module). The turn ends after the
// VAD's end_of_turn of silence, as in the incremental pipeline.
func (h *hearing) run(ctx context.Context, path string, sink func(at time.Duration, up iu.Update) error) error {
	var clk clock.Clock = clock.Real{}
	if !h.flags.realtime {
		v := clock.NewVirtual(time.Now())
		defer v.Close()
		clk = v
	}
	net := iu.NewNetwork(iu.WithClock(clk), iu.WithLogger(h.log))
	// A second of silence after the recording lets the last turn end by silence, as it
	// would in a conversation.
	src, err := source.NewFile(pipeline.NameInput, path, source.Config{TailSilence: time.Second})
	if err != nil {
		return err
	}
	v, err := vad.New(pipeline.NameVAD, h.flags.vadCfg, h.scorer)
	if err != nil {
		return err
	}
	te := turnend.New(pipeline.NameTurnEnd, turnend.Silence{After: v.HeardSilence(h.flags.vadCfg.EndOfTurn)}, turnend.Waits{})
	mods := []iu.Module{src, v, te}
	// Every module hears the VAD before the turn-end module does, so that what the VAD
	// sent comes before the end of turn it leads to (at the end of the stream, a segment
	// and its turn end at once).
	links := [][2]string{{pipeline.NameInput, pipeline.NameVAD}}
	heard := []string{pipeline.NameVAD, pipeline.NameTurnEnd}
	if h.engine != nil {
		a, err := asr.New(pipeline.NameASR, h.flags.asrCfg, h.engine)
		if err != nil {
			return err
		}
		mods = append(mods, a)
		links = append(links, [2]string{pipeline.NameInput, pipeline.NameASR}, [2]string{pipeline.NameVAD, pipeline.NameASR})
		heard = []string{pipeline.NameASR}
	}
	out := iu.ModuleFunc{ModuleName: pipeline.NameConsole, Fn: func(ctx context.Context, p *iu.Ports) error {
		start := p.Now()
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case iu.EventMessage:
				for _, up := range ev.Message.Updates {
					if err := sink(p.Now().Sub(start), up); err != nil {
						return err
					}
				}
			case iu.EventInputDone:
				return nil
			}
		}
	}}
	mods = append(mods, out)
	for _, from := range heard {
		links = append(links, [2]string{from, out.Name()})
	}
	links = append(links, [2]string{pipeline.NameInput, pipeline.NameTurnEnd}, [2]string{pipeline.NameVAD, pipeline.NameTurnEnd})
	if h.engine != nil {
		links = append(links, [2]string{pipeline.NameTurnEnd, pipeline.NameASR})
	}
	if err := net.Add(mods...); err != nil {
		return err
	}
	for _, l := range links {
		if err := net.ConnectNames(l[0], l[1]); err != nil {
			return err
		}
	}
	return net.Run(ctx)
}

// transcript runs path through the pipeline and returns its utterances, printing the
// word stream to w when w is not nil (UPDATEs only when updates is set).
func (h *hearing) transcript(ctx context.Context, path string, w io.Writer, updates bool) ([]asr.Utterance, error) {
	var utts []asr.Utterance
	err := h.run(ctx, path, func(at time.Duration, up iu.Update) error {
		if w != nil && (updates || up.Type != iu.UpdatePayload) {
			printUpdate(w, at, up)
		}
		if u, ok := up.IU.Payload.(asr.Utterance); ok && up.Type == iu.Add {
			utts = append(utts, u)
		}
		return nil
	})
	return utts, err
}

func printUpdate(w io.Writer, at time.Duration, up iu.Update) {
	switch pl := up.IU.Payload.(type) {
	case asr.Word:
		fmt.Fprintf(w, "%7.2fs  %-6s  %-18q %6.2f–%.2fs  stability %.2f", at.Seconds(), strings.ToUpper(up.Type.String()),
			pl.Text, pl.Start.Seconds(), pl.End.Seconds(), pl.Stability)
		if pl.Confidence > 0 {
			fmt.Fprintf(w, "  confidence %.2f", pl.Confidence)
		}
		fmt.Fprintln(w)
	case asr.Utterance:
		if up.Type == iu.Add {
			fmt.Fprintf(w, "%7.2fs  utterance %d (%.2f–%.2fs): %q\n", at.Seconds(), pl.ID, pl.Start.Seconds(), pl.End.Seconds(), pl.Text)
		}
	}
}

func runTranscribe(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "transcribe", "FILE.wav")
	var hf hearingFlags
	hf.register(a, fs)
	updates := fs.Bool("updates", false, "also print UPDATEs (a word's stability or confidence changed)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErrorf("want one WAV file")
	}
	h, err := openHearing(a, &hf, true)
	if err != nil {
		return err
	}
	defer h.Close()
	utts, err := h.transcript(ctx, pos[0], a.stdout, *updates)
	if err != nil {
		return err
	}
	var texts []string
	for _, u := range utts {
		if u.Text != "" {
			texts = append(texts, u.Text)
		}
	}
	fmt.Fprintf(a.stdout, "final: %s\n", strings.Join(texts, " "))
	return nil
}
