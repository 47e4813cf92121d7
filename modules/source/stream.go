package source

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

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
	start int64 // first sample at the pipeline rate
}

// playing is a scheduled recording whose file is open.
type playing struct {
	scheduled
	stream pcmStream
}

// scenarioStream renders a scenario: every recording resampled and placed at its time,
// overlapping ones mixed, silence in between. Recordings are opened only when the
// timeline reaches them and closed when they end, so that at any moment only the
// overlapping ones are open.
type scenarioStream struct {
	queue   []scheduled // not started yet, by start time
	playing []*playing
	pos     int64 // timeline position of the next sample
	end     int64 // the timeline ends here at the earliest (the latest recording end seen)
	quality audio.Quality
	skip    bool // log broken recordings and go on instead of failing
	log     *zap.Logger
	scratch []float32
	clipped int64
}

func newScenarioStream(sc *Scenario, q audio.Quality, skip bool, log *zap.Logger) *scenarioStream {
	s := &scenarioStream{quality: q, skip: skip, log: log}
	for _, rec := range sc.Recordings {
		s.queue = append(s.queue, scheduled{rec: rec, start: audio.DurationToSamples(rec.At, audio.PipelineRate)})
	}
	sort.SliceStable(s.queue, func(i, j int) bool { return s.queue[i].start < s.queue[j].start })
	return s
}

func (s *scenarioStream) Read(dst []float32) (int, error) {
	if len(dst) == 0 {
		return 0, nil
	}
	blockEnd := s.pos + int64(len(dst))
	for len(s.queue) > 0 && s.queue[0].start < blockEnd {
		next := s.queue[0]
		s.queue = s.queue[1:]
		s.end = max(s.end, next.start)
		stream, err := openFileStream(next.rec.File, s.quality)
		if err != nil {
			if err := s.broken(next.rec, err); err != nil {
				return 0, err
			}
			continue
		}
		s.playing = append(s.playing, &playing{scheduled: next, stream: stream})
	}
	if len(s.playing) == 0 && len(s.queue) == 0 && s.end <= s.pos {
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
	if len(s.playing) == 0 && len(s.queue) == 0 {
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
