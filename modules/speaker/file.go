package speaker

import (
	"context"
	"fmt"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
)

// FileConfig configures the file speaker.
type FileConfig struct {
	Options `yaml:",inline"`
	// Path is the WAV file that receives what the listener heard, on the output
	// timeline: silence between utterances included, sample x heard at x/Rate seconds
	// after the module started (so it lines up with the input stream for mixing).
	// Empty plays without writing.
	Path string `yaml:"path" json:"path"`
	// Rate is the output rate (audio.PipelineRate when zero).
	Rate int `yaml:"rate" json:"rate"`
	// Bits is the WAV sample size: 16 (default) or 24 for integer PCM, 32 for float.
	Bits int `yaml:"bits" json:"bits"`
	// OutputLatency simulates a device's latency: audio handed to the output is heard
	// this much later, and Pause or Interrupt leave this much tail.
	OutputLatency time.Duration `yaml:"output_latency" json:"output_latency"`
}

// NewFile returns a speaker that plays on the network's clock, real or virtual: it
// consumes audio at real-time rate on that clock in Step increments, reports progress
// exactly as the device speaker does, and writes what was heard to cfg.Path.
func NewFile(name string, cfg FileConfig) (*Speaker, error) {
	if cfg.Rate == 0 {
		cfg.Rate = audio.PipelineRate
	}
	if cfg.Bits == 0 {
		cfg.Bits = 16
	}
	if cfg.Rate < 1000 || cfg.Rate > 384000 {
		return nil, fmt.Errorf("speaker: file rate %d Hz out of range", cfg.Rate)
	}
	if cfg.OutputLatency < 0 {
		return nil, fmt.Errorf("speaker: negative output latency %v", cfg.OutputLatency)
	}
	return New(name, cfg.Options, func() Output { return &fileOutput{cfg: cfg} })
}

// fileOutput renders on the module's goroutine: at every wake it renders the frames the
// clock says have played since the last one. It plays the role of a device whose
// callback asks for exactly the elapsed time, and whose output is heard OutputLatency
// later.
type fileOutput struct {
	cfg     FileConfig
	start   time.Time
	rend    *Renderer
	wav     *audio.WAVWriter
	scratch []float32
}

func (f *fileOutput) Open(_ context.Context, _ *iu.Ports, start time.Time) (int, error) {
	f.start = start
	if f.cfg.Path != "" {
		w, err := audio.CreateWAVFile(f.cfg.Path, f.cfg.Rate, 1, f.cfg.Bits)
		if err != nil {
			return 0, fmt.Errorf("speaker: %w", err)
		}
		f.wav = w
		// The listener hears the output OutputLatency late: the file starts with that
		// much silence, so that its sample x is what was heard x/Rate after the start.
		if lat := audio.DurationToSamples(f.cfg.OutputLatency, f.cfg.Rate); lat > 0 {
			if err := f.wav.WriteSamples(make([]float32, lat)); err != nil {
				f.wav.Close()
				return 0, fmt.Errorf("speaker: %w", err)
			}
		}
	}
	f.scratch = make([]float32, 4096)
	return f.cfg.Rate, nil
}

func (f *fileOutput) Begin(r *Ring) error {
	f.rend = NewRenderer(r)
	return nil
}

func (f *fileOutput) Rate() int { return f.cfg.Rate }

func (f *fileOutput) Advance(now time.Time) error {
	due := audio.DurationToSamples(now.Sub(f.start), f.cfg.Rate)
	for f.rend.Frame() < due {
		n := int(min(due-f.rend.Frame(), int64(len(f.scratch))))
		f.rend.Render(f.scratch[:n], n, 1)
		if f.wav != nil {
			if err := f.wav.WriteSamples(f.scratch[:n]); err != nil {
				return fmt.Errorf("speaker: write %s: %w", f.cfg.Path, err)
			}
		}
	}
	return nil
}

func (f *fileOutput) Kick() { f.rend.Render(nil, 0, 1) }

func (f *fileOutput) HeardFrame(now time.Time) int64 {
	return max(0, audio.DurationToSamples(now.Sub(f.start)-f.cfg.OutputLatency, f.cfg.Rate))
}

func (f *fileOutput) FrameTime(frame int64) time.Time {
	return f.start.Add(f.cfg.OutputLatency + audio.SamplesToDuration(frame, f.cfg.Rate))
}

func (f *fileOutput) Failed() error { return nil }

func (f *fileOutput) Close(bool) error {
	if f.wav == nil {
		return nil
	}
	err := f.wav.Close()
	f.wav = nil
	if err != nil {
		return fmt.Errorf("speaker: %w", err)
	}
	return nil
}
