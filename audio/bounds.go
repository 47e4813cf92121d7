package audio

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parley-voice/parley/internal/regularfile"
)

// boundsRange is how far below the loudest 10 ms a frame may lie and still count as part
// of the sound: 35 dB leaves out a synthesiser's leading and trailing silence and the
// faint tail of a reverberation, and keeps a word's quiet consonants.
const boundsRange = 0.0178 // −35 dB

// SoundBounds returns where the sound in samples (mono, at rate) starts and ends: the
// first and last 10 ms frame whose RMS level is within 35 dB of the loudest frame's. A
// silent input has bounds 0, 0.
func SoundBounds(samples []float32, rate int) (start, end int) {
	frame := max(rate/100, 1)
	var levels []float64
	for i := 0; i+frame <= len(samples); i += frame {
		levels = append(levels, RMS(samples[i:i+frame]))
	}
	first, last := boundsOf(levels)
	if first < 0 {
		return 0, 0
	}
	return first * frame, (last + 1) * frame
}

// boundsOf returns the first and last index of levels within boundsRange of the
// loudest, or -1, -1 when all are silent.
func boundsOf(levels []float64) (first, last int) {
	peak := 0.0
	for _, l := range levels {
		peak = max(peak, l)
	}
	first, last = -1, -1
	if peak == 0 {
		return first, last
	}
	for i, l := range levels {
		if l >= peak*boundsRange {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	return first, last
}

// SoundBoundsFile is SoundBounds of a WAV file (its channels mixed down), as times from
// the file's start. It reads the file block by block, keeping one level per 10 ms.
func SoundBoundsFile(path string) (start, end time.Duration, err error) {
	fh, err := regularfile.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer fh.Close()
	r, err := NewWAVReader(fh)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	f := r.Format()
	frame := max(f.Rate/100, 1)
	buf := make([]float32, frame*f.Channels)
	var levels []float64
	for {
		n, err := readBlock(r, buf)
		if n == len(buf) {
			mono := Downmix(Frame{Samples: buf, Rate: f.Rate, Channels: f.Channels})
			levels = append(levels, RMS(mono.Samples))
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", path, err)
		}
	}
	first, last := boundsOf(levels)
	if first < 0 {
		return 0, 0, nil
	}
	return SamplesToDuration(int64(first*frame), f.Rate), SamplesToDuration(int64((last+1)*frame), f.Rate), nil
}
