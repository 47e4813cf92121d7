package main

import (
	"context"
	"fmt"
	"time"

	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modelstore"
	"github.com/parley-voice/parley/modules/vad"
)

func vadCommand() command {
	return command{
		Name:    "vad",
		Summary: "find the speech segments of a WAV file with the streaming VAD (start and end in seconds)",
		Run:     runVAD,
	}
}

// runVAD plays a file through the same streaming VAD module the agent uses and prints
// each committed segment as "START END" in seconds, one per line, so that thresholds
// can be tuned on recordings (and compared with whisper-vad-speech-segments).
func runVAD(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "vad", "FILE.wav")
	var hf hearingFlags
	hf.vadCfg = vad.DefaultConfig()
	hf.vadCfg.Model = a.paths.ModelFile(modelstore.DefaultFile(modelstore.KindVAD))
	hf.registerVAD(fs)
	turns := fs.Bool("turns", false, "also print the ends of turn, as lines starting with #")
	fs.BoolVar(&hf.realtime, "realtime", false, "play the file in real time (default: as fast as possible on a virtual clock)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErrorf("want one WAV file")
	}
	h, err := openHearing(a, &hf, false)
	if err != nil {
		return err
	}
	defer h.Close()
	return h.Run(ctx, pos[0], func(at time.Duration, up iu.Update) error {
		switch pl := up.IU.Payload.(type) {
		case vad.Segment:
			if up.Type == iu.Commit {
				fmt.Fprintf(a.stdout, "%.2f %.2f\n", pl.Start.Seconds(), pl.End.Seconds())
			}
		case vad.EndOfTurn:
			if *turns && up.Type == iu.Add {
				fmt.Fprintf(a.stdout, "# end of turn at %.2fs: speech %.2f–%.2fs, silence %.2fs\n",
					at.Seconds(), pl.SpeechStart.Seconds(), pl.SpeechEnd.Seconds(), pl.Silence.Seconds())
			}
		}
		return nil
	})
}
