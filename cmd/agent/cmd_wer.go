package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/wer"
	"github.com/parley-voice/parley/modules/asr"
)

func werCommand() command {
	return command{
		Name:    "wer",
		Summary: "measure the recogniser's word error rate on recordings with reference transcripts",
		Run:     runWER,
	}
}

// runWER transcribes every recording listed in DIR/transcripts.tsv and prints the word
// error rate of each and of all together (text compared without case and punctuation).
func runWER(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "wer", "[DIR]")
	var hf hearingFlags
	hf.register(a, fs)
	mode := fs.String("mode", "utterance", "utterance: each file as one utterance by itself, fed incrementally to the engine (comparable with pocketsphinx single); stream: through the VAD and the ASR module, as the agent listens (one session: pocketsphinx adapts to what it heard, --ps-adapt-after)")
	tsv := fs.String("transcripts", "", "transcripts file (default: DIR/transcripts.tsv)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		fs.Usage()
		return usageErrorf("want at most one folder")
	}
	if *mode != "stream" && *mode != "utterance" {
		return usageErrorf("--mode %q: want stream or utterance", *mode)
	}
	var dir string
	switch {
	case len(pos) == 1:
		dir = pos[0]
	case a.paths.Shared != "":
		dir = filepath.Join(a.paths.Shared, "audio")
	default:
		return usageErrorf("no DIR given and no shared test assets found (set PARLEY_SHARED)")
	}
	if *tsv == "" {
		*tsv = filepath.Join(dir, "transcripts.tsv")
	}
	ts, err := wer.LoadTranscripts(*tsv)
	if err != nil {
		return err
	}
	if len(ts) == 0 {
		return fmt.Errorf("%s lists no recordings", *tsv)
	}
	if *mode == "utterance" {
		// Each file is a recording of its own, decoded by itself: no utterance adapts
		// pocketsphinx for the next.
		hf.asrCfg.Pocketsphinx.AdaptAfter = 0
	}
	h, err := openHearing(a, &hf, true)
	if err != nil {
		return err
	}
	defer h.Close()

	base := filepath.Dir(*tsv)
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "file\tWER\terrors/words\thypothesis\n")
	var total wer.Result
	for _, tr := range ts {
		path := filepath.Join(base, tr.File)
		var hyp string
		if *mode == "stream" {
			utts, err := h.transcript(ctx, path, nil, false)
			if err != nil {
				return fmt.Errorf("%s: %w", tr.File, err)
			}
			var texts []string
			for _, u := range utts {
				texts = append(texts, u.Text)
			}
			hyp = strings.Join(texts, " ")
		} else if hyp, err = decodeWhole(ctx, h.engine, path, hf.asrCfg); err != nil {
			return fmt.Errorf("%s: %w", tr.File, err)
		}
		r := wer.Compare(tr.Text, hyp)
		total = total.Add(r)
		fmt.Fprintf(tw, "%s\t%.1f%%\t%d/%d\t%s\n", tr.File, 100*r.Rate(), r.Errors(), r.RefWords, hyp)
	}
	fmt.Fprintf(tw, "total\t%.2f%%\t%d/%d\t%d sub, %d del, %d ins (%s, %s)\n", 100*total.Rate(), total.Errors(), total.RefWords,
		total.Substitutions, total.Deletions, total.Insertions, hf.asrCfg.Engine, *mode)
	return tw.Flush()
}

// decodeWhole recognises a whole file as one utterance, fed in 20 ms pieces with a
// partial hypothesis every hop, as the ASR module drives the engine.
func decodeWhole(ctx context.Context, e asr.Engine, path string, cfg asr.Config) (string, error) {
	f, err := audio.DecodeWAVFile(path)
	if err != nil {
		return "", err
	}
	if f, err = audio.ToPipeline(f); err != nil {
		return "", err
	}
	if err := e.Start(ctx); err != nil {
		return "", err
	}
	piece := int(audio.DurationToSamples(audio.DefaultFrameDuration, audio.PipelineRate))
	hop := int(audio.DurationToSamples(cfg.EffectiveHop(), audio.PipelineRate))
	since := 0
	for s := f.Samples; len(s) > 0; {
		n := min(piece, len(s))
		if err := e.Feed(ctx, s[:n]); err != nil {
			return "", err
		}
		s = s[n:]
		if since += n; since >= hop {
			since = 0
			if _, err := e.Partial(ctx); err != nil {
				return "", err
			}
		}
	}
	hyp, err := e.Final(ctx)
	if err != nil {
		return "", err
	}
	return hyp.Text(), nil
}
