package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/turnend"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/modules/vad/silero"
	"go.uber.org/zap"
)

// HearingOptions configure the listening half of the agent on its own.
type HearingOptions struct {
	VAD vad.Config
	// ASR configures the recogniser; nil listens with the VAD alone.
	ASR *asr.Config
	// RealTime plays recordings in real time; by default they play as fast as possible
	// on a virtual clock.
	RealTime bool
	Logger   *zap.Logger
}

// Hearing is the listening half of the agent (recording → VAD → ASR), as 'agent
// transcribe', 'vad' and 'wer' run it: the VAD scorer and the recogniser are opened
// once and serve a network per recording, one at a time.
type Hearing struct {
	opts   HearingOptions
	scorer *whisper.VAD
	engine ASREngine // nil without a recogniser
}

// OpenHearing loads the VAD model and, when opts.ASR is set, the recogniser.
func OpenHearing(opts HearingOptions) (*Hearing, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if err := ggml.LoadBackends(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(opts.VAD.Model); err != nil {
		return nil, fmt.Errorf("VAD model: %w (agent models pull silero-vad, or --vad-model)", err)
	}
	scorer, err := silero.Open(opts.VAD)
	if err != nil {
		return nil, err
	}
	if opts.ASR == nil {
		return &Hearing{opts: opts, scorer: scorer}, nil
	}
	asrCfg := *opts.ASR // the caller's may change after
	opts.ASR = &asrCfg
	h := &Hearing{opts: opts, scorer: scorer}
	// Engines that read a model file: say how to get it rather than fail to load it.
	eng, _ := FindEngine(KeyASREngine, opts.ASR.Engine)
	for _, n := range eng.Needs(Config{ASR: *opts.ASR}) {
		if _, err := os.Stat(n.Path); n.Model && err != nil {
			scorer.Close()
			return nil, fmt.Errorf("%s model: %w (agent models pull, or --model)", n.What, err)
		}
	}
	if h.engine, err = OpenASREngine(*opts.ASR); err != nil {
		scorer.Close()
		return nil, err
	}
	return h, nil
}

// Close frees the recogniser and the VAD scorer.
func (h *Hearing) Close() error {
	var errs []error
	if h.engine != nil {
		errs = append(errs, h.engine.Close())
	}
	errs = append(errs, h.scorer.Close())
	return errors.Join(errs...)
}

// Run plays path through the VAD and the turn-end module (and the recogniser, when there
// is one) and hands every update the recogniser sends to sink (without a recogniser,
// every update of the VAD and the turn-end module), on sink's own goroutine, with the
// time since the recording started playing.
func (h *Hearing) Run(ctx context.Context, path string, sink func(at time.Duration, up iu.Update) error) error {
	var clk clock.Clock = clock.Real{}
	if !h.opts.RealTime {
		v := clock.NewVirtual(time.Now())
		defer v.Close()
		clk = v
	}
	net := iu.NewNetwork(iu.WithClock(clk), iu.WithLogger(h.opts.Logger))
	// A second of silence after the recording lets the last turn end by silence, as it
	// would in a conversation.
	src, err := source.NewFile(NameInput, path, source.Config{TailSilence: time.Second})
	if err != nil {
		return err
	}
	v, err := vad.New(NameVAD, h.opts.VAD, h.scorer)
	if err != nil {
		return err
	}
	// The turn ends after the VAD's end_of_turn of silence, as in the incremental pipeline.
	te := turnend.New(NameTurnEnd, turnend.Silence{After: v.HeardSilence(h.opts.VAD.EndOfTurn)}, turnend.Waits{})
	mods := []iu.Module{src, v, te}
	// Every module hears the VAD before the turn-end module does, so that what the VAD
	// sent comes before the end of turn it leads to (at the end of the stream, a segment
	// and its turn end at once).
	links := [][2]string{{NameInput, NameVAD}}
	heard := []string{NameVAD, NameTurnEnd}
	if h.engine != nil {
		a, err := asr.New(NameASR, *h.opts.ASR, h.engine)
		if err != nil {
			return err
		}
		mods = append(mods, a)
		links = append(links, [2]string{NameInput, NameASR}, [2]string{NameVAD, NameASR})
		heard = []string{NameASR}
	}
	out := iu.ModuleFunc{ModuleName: NameConsole, Fn: func(ctx context.Context, p *iu.Ports) error {
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
	links = append(links, [2]string{NameInput, NameTurnEnd}, [2]string{NameVAD, NameTurnEnd})
	if h.engine != nil {
		links = append(links, [2]string{NameTurnEnd, NameASR})
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

// Transcript runs path through the VAD and the recogniser and returns its utterances;
// each, when set, sees every update on the way.
func (h *Hearing) Transcript(ctx context.Context, path string, each func(at time.Duration, up iu.Update)) ([]asr.Utterance, error) {
	var utts []asr.Utterance
	err := h.Run(ctx, path, func(at time.Duration, up iu.Update) error {
		if each != nil {
			each(at, up)
		}
		if u, ok := up.IU.Payload.(asr.Utterance); ok && up.Type == iu.Add {
			utts = append(utts, u)
		}
		return nil
	})
	return utts, err
}

// DecodeWhole recognises a whole file as one utterance, without the VAD, fed in 20 ms
// pieces with a partial hypothesis every hop, as the ASR module drives the engine.
func (h *Hearing) DecodeWhole(ctx context.Context, path string) (string, error) {
	if h.engine == nil {
		return "", errors.New("hearing: no recogniser open")
	}
	f, err := audio.DecodeWAVFile(path)
	if err != nil {
		return "", err
	}
	if f, err = audio.ToPipeline(f); err != nil {
		return "", err
	}
	e := h.engine
	if err := e.Start(ctx); err != nil {
		return "", err
	}
	piece := int(audio.DurationToSamples(audio.DefaultFrameDuration, audio.PipelineRate))
	hop := int(audio.DurationToSamples(h.opts.ASR.EffectiveHop(), audio.PipelineRate))
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
