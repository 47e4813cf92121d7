// Package source holds the network modules that play recorded audio into a Parley
// network in place of the microphone: a single WAV file (NewFile) or a scenario of
// several recordings on one timeline (NewScenario).
//
// A source emits the pipeline's audio: audio.Frame IUs of 16 kHz mono float32, each
// sent as ADD+COMMIT in one batch, with Start the frame's first sample in the stream.
// Frames are contiguous from 0 and all FrameDuration long except possibly the last.
// Whatever the file's rate and channel count, the audio is down-mixed and resampled
// while it streams, so memory use does not grow with the recording's length.
//
// Pacing follows the network's clock, like a microphone: frame k (starting at sample
// s) is sent at start + s/16000 s. On the real clock that is real time; on
// clock.Virtual a replay runs as fast as the machine allows and identically every time.
//
// A source takes no input; it finishes after its last frame (the network then tells its
// consumers their input is done), or when the network stops.
package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/speaker"
	"go.uber.org/zap"
)

// Pacing says when a source sends its frames.
type Pacing string

const (
	// PaceClock sends each frame when the network's clock reaches its stream position
	// (the default): real time on the real clock, instant on a virtual one.
	PaceClock Pacing = "clock"
	// PaceNone sends frames as fast as the consumers take them (for offline tools on
	// the real clock, such as transcribing a file).
	PaceNone Pacing = "none"
)

// ErrorPolicy says what a source does with a recording it cannot read.
type ErrorPolicy string

const (
	// OnErrorFail stops the source with the error, which stops the network (the
	// default).
	OnErrorFail ErrorPolicy = "fail"
	// OnErrorSkip logs the error and plays silence in place of the rest of the broken
	// recording, so that one bad file does not end a long scenario run.
	OnErrorSkip ErrorPolicy = "skip"
)

// Config configures a source. The zero value is usable.
type Config struct {
	// FrameDuration is the length of each audio IU (20 ms by default).
	FrameDuration time.Duration `yaml:"frame_duration"`
	// Pacing is PaceClock by default.
	Pacing Pacing `yaml:"pacing"`
	// LeadSilence is played before the recording starts.
	LeadSilence time.Duration `yaml:"lead_silence"`
	// TailSilence is played after it ends, so that the VAD sees the end of the last
	// utterance. For scenarios it adds to the scenario's own tail.
	TailSilence time.Duration `yaml:"tail_silence"`
	// Loop plays the recording (with its tail silence) again and again until the
	// network stops.
	Loop bool `yaml:"loop"`
	// OnError is OnErrorFail by default.
	OnError ErrorPolicy `yaml:"on_error"`
	// Quality is the resampler's quality (audio.QualityDefault when zero).
	Quality audio.Quality `yaml:"-"`
}

// withDefaults fills in defaults and checks the values.
func (c Config) withDefaults() (Config, error) {
	if c.FrameDuration == 0 {
		c.FrameDuration = audio.DefaultFrameDuration
	}
	if c.Pacing == "" {
		c.Pacing = PaceClock
	}
	if c.OnError == "" {
		c.OnError = OnErrorFail
	}
	minFrame := audio.SamplesToDuration(1, audio.PipelineRate)
	switch {
	case c.FrameDuration < minFrame || c.FrameDuration > 10*time.Second:
		return c, fmt.Errorf("source: frame duration %v must lie between %v and 10s", c.FrameDuration, minFrame)
	case c.LeadSilence < 0 || c.TailSilence < 0:
		return c, fmt.Errorf("source: lead and tail silence must not be negative (%v, %v)", c.LeadSilence, c.TailSilence)
	case c.Pacing != PaceClock && c.Pacing != PaceNone:
		return c, fmt.Errorf("source: pacing %q (want %q or %q)", c.Pacing, PaceClock, PaceNone)
	case c.OnError != OnErrorFail && c.OnError != OnErrorSkip:
		return c, fmt.Errorf("source: on_error %q (want %q or %q)", c.OnError, OnErrorFail, OnErrorSkip)
	}
	if !c.Quality.Valid() {
		return c, fmt.Errorf("source: unknown resampler quality %v", c.Quality)
	}
	return c, nil
}

// Source is a network module that plays a recording or a scenario. It implements
// iu.Module.
type Source struct {
	name string
	cfg  Config
	// what describes the recording for logs.
	what string
	// open starts the recording from its beginning (called again for each loop).
	open func(log *zap.Logger) (pcmStream, error)

	mu         sync.Mutex
	placements []Placement
}

// NewFile returns a source that plays the WAV file at path. The file's header is
// checked now, so that a missing, truncated or unsupported file is reported before the
// network starts (unless cfg.OnError is OnErrorSkip, which leaves it to the run).
func NewFile(name, path string, cfg Config) (*Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if _, err := audio.StatWAVFile(path); err != nil && cfg.OnError != OnErrorSkip {
		return nil, fmt.Errorf("source %s: %w", name, err)
	}
	return &Source{
		name: name,
		cfg:  cfg,
		what: path,
		open: func(*zap.Logger) (pcmStream, error) { return openFileStream(path, cfg.Quality) },
	}, nil
}

// NewScenario returns a source that plays sc. Each recording's header is checked now
// (unless cfg.OnError is OnErrorSkip).
func NewScenario(name string, sc *Scenario, cfg Config) (*Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if sc == nil || len(sc.Recordings) == 0 {
		return nil, fmt.Errorf("source %s: %w: no recordings", name, ErrInvalidScenario)
	}
	if cfg.OnError != OnErrorSkip {
		for _, rec := range sc.Recordings {
			if rec.File == "" {
				return nil, fmt.Errorf("source %s: recording %q (scenario line %d) has no file here: synthesise what it says (%q) first", name, rec.Name, rec.Line, rec.Says)
			}
			if _, err := audio.StatWAVFile(rec.File); err != nil {
				return nil, fmt.Errorf("source %s: recording %q (scenario line %d): %w", name, rec.Name, rec.Line, err)
			}
		}
	}
	plan, err := planScenario(sc)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", name, err)
	}
	cfg.TailSilence += sc.Tail
	what := sc.Path
	if what == "" {
		what = "scenario " + sc.Name
	}
	skip := cfg.OnError == OnErrorSkip
	s := &Source{name: name, cfg: cfg, what: what}
	s.open = func(log *zap.Logger) (pcmStream, error) {
		s.mu.Lock()
		s.placements = nil // a new pass of a looping scenario
		s.mu.Unlock()
		return newScenarioStream(plan, cfg.Quality, skip, log, s.place), nil
	}
	return s, nil
}

// place records where a recording played (the stream calls it on the source's goroutine).
func (s *Source) place(p Placement) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.placements = append(s.placements, p)
}

// Placements says where each recording of a scenario played (in the order they were
// placed; the latest pass of a looping one); recordings that never played are missing.
// Call it after the network ran.
func (s *Source) Placements() []Placement {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.placements)
}

// Open returns a source for path: a scenario when it ends in .yaml or .yml, otherwise a
// WAV file. It is what a command that replays "a recording or a scenario" calls.
func Open(name, path string, cfg Config) (*Source, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		sc, err := LoadScenario(path)
		if err != nil {
			return nil, err
		}
		return NewScenario(name, sc, cfg)
	}
	return NewFile(name, path, cfg)
}

func checkName(name string) error {
	if name == "" || strings.ContainsRune(name, '/') {
		return fmt.Errorf("source: module name %q must be non-empty and contain no '/'", name)
	}
	return nil
}

// Name implements iu.Module.
func (s *Source) Name() string { return s.name }

// Run implements iu.Module: it plays the recording frame by frame.
func (s *Source) Run(ctx context.Context, p *iu.Ports) error {
	log := p.Logger()
	frameLen := int(audio.DurationToSamples(s.cfg.FrameDuration, audio.PipelineRate))
	tl := &timeline{src: s, log: log}
	defer tl.close()

	start := p.Now()
	log.Info("playing", zap.String("source", s.what), zap.Duration("frame", s.cfg.FrameDuration), zap.String("pacing", string(s.cfg.Pacing)))
	cues := agentCues{tl: tl, start: start, lead: audio.DurationToSamples(s.cfg.LeadSilence, audio.PipelineRate), frame: int64(frameLen)}
	var pos int64
	buf := make([]float32, frameLen)
	for {
		n, err := tl.read(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if n > 0 {
			deadline := p.Now()
			if s.cfg.Pacing == PaceClock {
				// A microphone delivers a frame once its last sample was spoken; so does
				// the replay, so that latencies measured on replays match live ones.
				deadline = start.Add(audio.SamplesToDuration(pos+int64(n), audio.PipelineRate))
			}
			if stopped, err := waitUntil(ctx, p, deadline, cues.heard); stopped || err != nil {
				log.Info("stopped", zap.Duration("played", audio.SamplesToDuration(pos, audio.PipelineRate)))
				return err
			}
			frame := audio.Frame{Samples: append([]float32(nil), buf[:n]...), Rate: audio.PipelineRate, Channels: 1, Start: pos}
			u := p.NewIU(frame)
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
			pos += int64(n)
		}
		if errors.Is(err, io.EOF) {
			log.Info("finished", zap.Duration("played", audio.SamplesToDuration(pos, audio.PipelineRate)))
			// Consumers learn here that no more audio comes (audio.EndOfStream).
			u := p.NewIU(audio.EndOfStream{Pos: pos, Rate: audio.PipelineRate})
			return p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
		}
	}
}

// waitUntil waits through Ports.Next until deadline, handing each message to heard. It
// reports stopped when the network is stopping (the source's only producer, the speaker
// in a scenario placed after the agent, outlives it, so the end of its input means
// just that); local events are not expected and are ignored.
func waitUntil(ctx context.Context, p *iu.Ports, deadline time.Time, heard func(iu.Message, time.Time)) (stopped bool, err error) {
	for {
		ev, err := p.Next(ctx, deadline)
		if err != nil {
			return true, err
		}
		switch ev.Kind {
		case iu.EventDeadline:
			return false, nil
		case iu.EventInputDone:
			return true, nil
		case iu.EventMessage:
			heard(ev.Message, p.Now())
		}
	}
}

// agentCues follows the speaker's progress for a scenario's recordings placed after the
// agent (Recording.AfterAgent): it counts the agent's turns as they first become
// audible and tells the scenario stream when each did.
type agentCues struct {
	tl    *timeline
	start time.Time
	lead  int64 // the lead silence's samples, before the scenario's timeline starts
	frame int64
	turns []int // the agent turns heard, in the order they first became audible
}

// heard takes a message that arrived at now.
func (c *agentCues) heard(m iu.Message, now time.Time) {
	for _, u := range m.Updates {
		pr, ok := u.IU.Payload.(speaker.Progress)
		if !ok || u.Type != iu.Add || pr.State != speaker.Playing {
			continue
		}
		turned, ok := pr.Item.(speaker.Turned)
		if !ok || slices.Contains(c.turns, turned.AgentTurn()) {
			continue
		}
		c.turns = append(c.turns, turned.AgentTurn())
		// The listener has heard pr.Offset samples of the turn's first audio IU by now.
		var heardFor int64
		if a, ok := pr.Item.(speaker.Audio); ok && a.PCM().Rate > 0 {
			heardFor = audio.DurationToSamples(audio.SamplesToDuration(int64(pr.Offset), a.PCM().Rate), audio.PipelineRate)
		}
		stream, ok := c.tl.stream.(*scenarioStream)
		if !ok {
			continue // not playing the scenario (its lead or tail silence)
		}
		// The frame being waited for is mixed already: the earliest sample a recording
		// can start at is the next frame's, whether or not the source sent this one yet
		// (on a virtual clock both happen at the same instant, in either order).
		pos := audio.DurationToSamples(now.Sub(c.start), audio.PipelineRate) - c.lead
		stream.agentAudible(len(c.turns), pos-heardFor, pos+c.frame)
	}
}

// timeline strings together lead silence, the recording, tail silence and, when
// looping, the recording and tail again, as one stream of samples.
type timeline struct {
	src    *Source
	log    *zap.Logger
	stage  stage
	stream pcmStream
	// silenceLeft counts the samples of the current silence stage still to play.
	silenceLeft int64
	// played counts the current pass's recording samples (to stop a loop of nothing).
	played int64
	passes int
}

type stage uint8

const (
	stageStart stage = iota
	stageLead
	stageRecording
	stageTail
	stageDone
)

// read fills buf with the next samples, crossing stages as needed. It returns a short
// count only at the very end, together with io.EOF.
func (t *timeline) read(buf []float32) (int, error) {
	n := 0
	for n < len(buf) {
		switch t.stage {
		case stageStart:
			t.stage, t.silenceLeft = stageLead, audio.DurationToSamples(t.src.cfg.LeadSilence, audio.PipelineRate)
		case stageLead, stageTail:
			k := int(min(int64(len(buf)-n), t.silenceLeft))
			clear(buf[n : n+k])
			n += k
			t.silenceLeft -= int64(k)
			if t.silenceLeft > 0 {
				continue
			}
			if t.stage == stageTail && !t.nextPass() {
				t.stage = stageDone
				continue
			}
			if err := t.openRecording(); err != nil {
				return n, err
			}
		case stageRecording:
			k, err := t.stream.Read(buf[n:])
			n += k
			t.played += int64(k)
			if err == nil && k == 0 {
				err = errors.New("recording stream made no progress") // guards against spinning
			}
			if err == nil {
				continue
			}
			t.stream.Close()
			t.stream = nil
			if !errors.Is(err, io.EOF) {
				if t.src.cfg.OnError != OnErrorSkip {
					return n, fmt.Errorf("source %s: %w", t.src.name, err)
				}
				t.log.Warn("recording broken; playing silence instead of the rest", zap.Error(err))
			}
			t.stage, t.silenceLeft = stageTail, audio.DurationToSamples(t.src.cfg.TailSilence, audio.PipelineRate)
		case stageDone:
			return n, io.EOF
		}
	}
	return n, nil
}

// nextPass reports whether to play the recording again (looping) after a tail.
func (t *timeline) nextPass() bool {
	if !t.src.cfg.Loop {
		return false
	}
	if t.played == 0 && t.src.cfg.TailSilence == 0 {
		t.log.Warn("not looping: the recording played no audio")
		return false
	}
	return true
}

// openRecording starts a pass of the recording.
func (t *timeline) openRecording() error {
	t.passes++
	t.played = 0
	stream, err := t.src.open(t.log)
	if err != nil {
		if t.src.cfg.OnError != OnErrorSkip {
			return fmt.Errorf("source %s: %w", t.src.name, err)
		}
		t.log.Warn("cannot play the recording; playing silence instead", zap.Error(err))
		t.stage, t.silenceLeft = stageTail, audio.DurationToSamples(t.src.cfg.TailSilence, audio.PipelineRate)
		return nil
	}
	t.stream = stream
	t.stage = stageRecording
	return nil
}

func (t *timeline) close() {
	if t.stream != nil {
		t.stream.Close()
	}
}
