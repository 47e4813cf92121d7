package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-voice/parley/modelstore"

	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/pipeline"
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
	fs.BoolVar(&h.asrCfg.Pocketsphinx.EarlyAdapt, "ps-early-adapt", h.asrCfg.Pocketsphinx.EarlyAdapt, "pocketsphinx: within the session's first utterance, restart the streaming pass from the cepstral mean of its first --ps-adapt-after once that much is in, so that its final is the streaming pass's own")
	fs.IntVar(&h.asrCfg.Pocketsphinx.MaxHMMsPerFrame, "ps-max-hmms", h.asrCfg.Pocketsphinx.MaxHMMsPerFrame, "pocketsphinx: HMMs the first pass keeps active per frame (maxhmmpf; 0: pocketsphinx's own, 30000)")
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
	fs.Func("threshold", fmt.Sprintf("speech probability that starts speech, in (0, 1] (default %g)", thr), float32Func(&c.Threshold, floatRange{min: 0, max: 1, openMin: true}))
	fs.Func("neg-threshold", "probability below which silence starts, in [0, threshold] (default: threshold-0.15)", float32Func(&c.NegThreshold, floatRange{min: 0, max: 1}))
	fs.DurationVar(&c.MinSpeech, "min-speech", c.MinSpeech, "shortest speech that counts")
	fs.DurationVar(&c.MinSilence, "min-silence", c.MinSilence, "silence that ends a segment")
	fs.DurationVar(&c.SpeechPad, "pad", c.SpeechPad, "padding added before and after each segment")
	fs.DurationVar(&c.MergeGap, "merge-gap", c.MergeGap, "segments closer than this are merged")
	fs.DurationVar(&c.EndOfTurn, "eot", c.EndOfTurn, "silence after speech that ends the user's turn")
	fs.DurationVar(&c.EndTrim, "end-trim", c.EndTrim, "date ends where the level fell, up to this long before Silero's (0: libwhisper's segments, as whisper-vad-speech-segments finds them; vad.end_trim)")
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

// openHearing checks the flags and loads the VAD model and, when withASR, the
// recogniser.
func openHearing(a *app, f *hearingFlags, withASR bool) (*pipeline.Hearing, error) {
	if err := f.validate(withASR); err != nil {
		return nil, err
	}
	opts := pipeline.HearingOptions{VAD: f.vadCfg, RealTime: f.realtime, Logger: a.log}
	if withASR {
		threads, note := pipeline.CapThreads("--threads", f.asrCfg.Whisper.Threads)
		if note != "" {
			a.log.Warn("threads capped: " + note)
		}
		f.asrCfg.Whisper.Threads = threads
		opts.ASR = &f.asrCfg
	}
	return pipeline.OpenHearing(opts)
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
	utts, err := h.Transcript(ctx, pos[0], func(at time.Duration, up iu.Update) {
		if *updates || up.Type != iu.UpdatePayload {
			printUpdate(a.stdout, at, up)
		}
	})
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
