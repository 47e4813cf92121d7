package source

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/regularfile"
	"go.uber.org/zap"
)

// pcmStream yields the pipeline's audio: 16 kHz mono float32 samples. Read fills dst
// as far as it can and returns io.EOF after the last sample.
type pcmStream interface {
	Read(dst []float32) (int, error)
	Close() error
}

// readChunkFrames is how many input frames a file stream decodes at a time: about 90 ms
// at 44.1 kHz, so memory stays small whatever the file's length.
const readChunkFrames = 4096

// fileStream decodes a WAV file block by block, down-mixes it and resamples it to the
// pipeline rate as it goes, so that hour-long recordings never sit in memory.
type fileStream struct {
	path     string
	fh       *os.File
	wav      *audio.WAVReader
	format   audio.WAVFormat
	rs       *audio.Resampler
	raw      []float32 // decoded input, interleaved
	pending  []float32 // resampled output not handed out yet
	produced int64     // samples handed out so far
	end      error     // io.EOF or the decoding error, once the input is exhausted
}

func openFileStream(path string, q audio.Quality) (*fileStream, error) {
	fh, err := regularfile.Open(path)
	if err != nil {
		return nil, err
	}
	wav, err := audio.NewWAVReader(fh)
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	format := wav.Format()
	rs, err := audio.NewResampler(format.Rate, audio.PipelineRate, 1, q)
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &fileStream{
		path:   path,
		fh:     fh,
		wav:    wav,
		format: format,
		rs:     rs,
		raw:    make([]float32, readChunkFrames*format.Channels),
	}, nil
}

func (s *fileStream) Read(dst []float32) (int, error) {
	for len(s.pending) == 0 && s.end == nil {
		s.fill()
	}
	if len(s.pending) == 0 {
		return 0, s.end
	}
	n := copy(dst, s.pending)
	s.pending = s.pending[n:]
	s.produced += int64(n)
	return n, nil
}

// fill decodes and resamples the next block. At the end of the input (or at a decoding
// error) it drains the resampler, so nothing decoded is lost, and records why it ended.
func (s *fileStream) fill() {
	n, err := s.wav.Read(s.raw)
	if n > 0 {
		block := audio.Downmix(audio.Frame{Samples: s.raw[:n], Rate: s.format.Rate, Channels: s.format.Channels})
		s.pending = s.rs.Process(block.Samples)
	}
	if err == nil {
		return
	}
	s.pending = append(s.pending, s.rs.Flush()...)
	switch {
	case !errors.Is(err, io.EOF):
		s.end = fmt.Errorf("%s: %w", s.path, err)
	case s.produced == 0 && len(s.pending) == 0:
		s.end = fmt.Errorf("%s: %w: no sample frames before the end of the file", s.path, audio.ErrEmptyAudio)
	default:
		s.end = io.EOF
	}
}

func (s *fileStream) Close() error { return s.fh.Close() }

// scheduled is a recording placed on a scenario's timeline.
type scheduled struct {
	rec   Recording
	index int   // in the scenario's recordings
	start int64 // first sample at the pipeline rate
	skip  int64 // samples of the file left out at its start
}

// playing is a scheduled recording whose file is open.
type playing struct {
	scheduled
	stream pcmStream
}

// planned is a recording as the scenario places it, before the stream plays it: at a
// fixed start, or waiting for an agent turn (cue) with a fallback start.
type planned struct {
	rec   Recording
	index int
	start int64     // the file's start; with a cue, the fallback
	how   string    // PlacedAt or PlacedAfterPrevious; with a cue, PlacedAfterAgent
	onset int64     // with a cue: where the speech starts in the file
	cue   *AgentCue // nil for a fixed start
}

// planScenario places sc's recordings: at their at, after the previous one's speech, or
// (cue) after the agent. Speech bounds are read from the files that need them.
func planScenario(sc *Scenario) ([]planned, error) {
	out := make([]planned, len(sc.Recordings))
	var prevEnd int64 // the previous recording's speech end on the timeline
	for i, rec := range sc.Recordings {
		p := planned{rec: rec, index: i, start: audio.DurationToSamples(rec.At, audio.PipelineRate), how: PlacedAt}
		var on, off time.Duration
		if rec.AfterPrevious != nil || rec.AfterAgent != nil || (i+1 < len(sc.Recordings) && sc.Recordings[i+1].AfterPrevious != nil) {
			var err error
			if on, off, err = audio.SoundBoundsFile(rec.File); err != nil {
				return nil, fmt.Errorf("recording %q (scenario line %d): where its speech lies: %w", rec.Name, rec.Line, err)
			}
		}
		onset := audio.DurationToSamples(on, audio.PipelineRate)
		switch {
		case rec.AfterPrevious != nil:
			p.start = max(prevEnd+audio.DurationToSamples(*rec.AfterPrevious, audio.PipelineRate)-onset, 0)
			p.how = PlacedAfterPrevious
		case rec.AfterAgent != nil:
			p.cue, p.onset, p.how = rec.AfterAgent, onset, PlacedAfterAgent
		}
		prevEnd = p.start + audio.DurationToSamples(off, audio.PipelineRate)
		out[i] = p
	}
	return out, nil
}

// scenarioStream renders a scenario: every recording resampled and placed at its time,
// overlapping ones mixed, silence in between. Recordings are opened only when the
// timeline reaches them and closed when they end, so that at any moment only the
// overlapping ones are open. Recordings placed after the agent wait (pending) until
// agentAudible places them, or until the timeline reaches their fallback; the stream
// does not end while one waits.
type scenarioStream struct {
	queue   []scheduled // not started yet, by start time
	pending []planned   // waiting for an agent turn
	playing []*playing
	pos     int64 // timeline position of the next sample
	end     int64 // the timeline ends here at the earliest (the latest recording end seen)
	quality audio.Quality
	skip    bool // log broken recordings and go on instead of failing
	log     *zap.Logger
	scratch []float32
	clipped int64
	// placed hears where each recording is placed (Source.Placements).
	placed func(Placement)
}

func newScenarioStream(plan []planned, q audio.Quality, skip bool, log *zap.Logger, placed func(Placement)) *scenarioStream {
	s := &scenarioStream{quality: q, skip: skip, log: log, placed: placed}
	for _, p := range plan {
		if p.cue != nil {
			s.pending = append(s.pending, p)
			continue
		}
		s.schedule(scheduled{rec: p.rec, index: p.index, start: p.start}, p.how)
	}
	return s
}

// schedule queues a recording and reports where it plays.
func (s *scenarioStream) schedule(sch scheduled, how string) {
	i := sort.Search(len(s.queue), func(i int) bool { return s.queue[i].start > sch.start })
	s.queue = slices.Insert(s.queue, i, sch)
	if s.placed != nil {
		s.placed(Placement{Index: sch.index, Start: audio.SamplesToDuration(sch.start, audio.PipelineRate),
			Skipped: audio.SamplesToDuration(sch.skip, audio.PipelineRate), How: how})
	}
}

// agentAudible places the recordings waiting for the agent's turn-th audible turn, which
// became audible at heardAt (a timeline position): each so that its speech starts its
// offset later, but not before earliest (the first sample not yet mixed). A recording
// that would start earlier leaves out as much of its leading silence as that takes.
func (s *scenarioStream) agentAudible(turn int, heardAt, earliest int64) {
	earliest = max(earliest, s.pos)
	still := s.pending[:0]
	for _, p := range s.pending {
		if p.cue.Turn != turn {
			still = append(still, p)
			continue
		}
		start := heardAt + audio.DurationToSamples(p.cue.Offset, audio.PipelineRate) - p.onset
		var skip int64
		if start < earliest {
			skip = min(earliest-start, p.onset)
			start += skip
		}
		start = max(start, earliest)
		s.schedule(scheduled{rec: p.rec, index: p.index, start: start, skip: skip}, PlacedAfterAgent)
	}
	clear(s.pending[len(still):])
	s.pending = still
}

// fallBack places the waiting recordings whose fallback lies before blockEnd.
func (s *scenarioStream) fallBack(blockEnd int64) {
	still := s.pending[:0]
	for _, p := range s.pending {
		if p.start >= blockEnd {
			still = append(still, p)
			continue
		}
		s.log.Warn("the agent's turn did not become audible before the recording's fallback time; playing it then",
			zap.String("recording", p.rec.Name), zap.Int("line", p.rec.Line), zap.Int("agent_turn", p.cue.Turn))
		s.schedule(scheduled{rec: p.rec, index: p.index, start: max(p.start, s.pos)}, PlacedFallback)
	}
	clear(s.pending[len(still):])
	s.pending = still
}

func (s *scenarioStream) Read(dst []float32) (int, error) {
	if len(dst) == 0 {
		return 0, nil
	}
	blockEnd := s.pos + int64(len(dst))
	s.fallBack(blockEnd)
	for len(s.queue) > 0 && s.queue[0].start < blockEnd {
		next := s.queue[0]
		s.queue = s.queue[1:]
		s.end = max(s.end, next.start)
		stream, err := openFileStream(next.rec.File, s.quality)
		if err == nil && next.skip > 0 {
			err = discard(stream, next.skip)
			if err != nil {
				stream.Close()
			}
		}
		if err != nil {
			if err := s.broken(next.rec, err); err != nil {
				return 0, err
			}
			continue
		}
		s.playing = append(s.playing, &playing{scheduled: next, stream: stream})
	}
	idle := len(s.playing) == 0 && len(s.queue) == 0 && len(s.pending) == 0
	if idle && s.end <= s.pos {
		return 0, io.EOF
	}

	clear(dst)
	still := s.playing[:0]
	for _, p := range s.playing {
		offset := int(max(p.start-s.pos, 0))
		done, err := s.mixInto(dst, offset, p)
		s.end = max(s.end, s.pos+int64(offset)+int64(done))
		if err != nil {
			p.stream.Close()
			if errors.Is(err, io.EOF) {
				continue
			}
			if err := s.broken(p.rec, err); err != nil {
				s.closeAll()
				return 0, err
			}
			continue
		}
		still = append(still, p)
	}
	clear(s.playing[len(still):])
	s.playing = still

	n := len(dst)
	if len(s.playing) == 0 && len(s.queue) == 0 && len(s.pending) == 0 {
		// Everything has ended: the timeline stops at the end of the last recording,
		// not at the end of this block.
		n = int(min(int64(n), s.end-s.pos))
		if n <= 0 {
			return 0, io.EOF
		}
	}
	if c := audio.Clip(dst[:n]); c > 0 {
		if s.clipped == 0 {
			s.log.Warn("overlapping recordings exceed full scale; clipping", zap.Duration("at", audio.SamplesToDuration(s.pos, audio.PipelineRate)))
		}
		s.clipped += int64(c)
	}
	s.pos += int64(n)
	return n, nil
}

// discard reads and drops the stream's first n samples.
func discard(stream pcmStream, n int64) error {
	buf := make([]float32, min(n, 4096))
	for n > 0 {
		k, err := stream.Read(buf[:min(n, int64(len(buf)))])
		n -= int64(k)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
	return nil
}

// mixInto adds the recording's next samples into dst from offset on, with its gain. It
// returns how many samples it mixed and io.EOF once the recording has ended.
func (s *scenarioStream) mixInto(dst []float32, offset int, p *playing) (int, error) {
	want := len(dst) - offset
	if cap(s.scratch) < want {
		s.scratch = make([]float32, want)
	}
	buf := s.scratch[:want]
	got := 0
	for got < want {
		n, err := p.stream.Read(buf[got:])
		got += n
		if err != nil {
			audio.Mix(dst, buf[:got], offset, float32(p.rec.Gain))
			return got, err
		}
	}
	audio.Mix(dst, buf, offset, float32(p.rec.Gain))
	return got, nil
}

// broken decides what a recording that cannot be read does to the scenario: nothing
// but a warning when skipping, otherwise it ends the stream with the error.
func (s *scenarioStream) broken(rec Recording, err error) error {
	if s.skip {
		s.log.Warn("skipping broken recording; it is silence from here", zap.String("recording", rec.Name), zap.Int("line", rec.Line), zap.Error(err))
		return nil
	}
	return fmt.Errorf("recording %q (scenario line %d): %w", rec.Name, rec.Line, err)
}

func (s *scenarioStream) closeAll() {
	for _, p := range s.playing {
		p.stream.Close()
	}
	s.playing = nil
}

func (s *scenarioStream) Close() error {
	s.closeAll()
	if s.clipped > 0 {
		s.log.Warn("scenario mix clipped", zap.Int64("samples", s.clipped))
	}
	return nil
}
