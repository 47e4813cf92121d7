package audio

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parley-voice/parley/internal/regularfile"
)

// mixBlockFrames is how many sample frames MixWAVFiles holds per input at a time.
const mixBlockFrames = 1 << 14

// MixWAVFiles mixes WAV files of one rate and channel count, each starting at sample 0,
// into a new WAV file at path in the encoding bits selects, as long as the longest. When
// the mix peaks above ceiling it is scaled down as a whole to peak at ceiling (as
// LimitPeak does), so it never clips. It streams: the inputs are read twice, a block at
// a time (once for the peak, once to write), and an hour of audio takes no more memory
// than a second. Like WriteWAVFile it replaces path only once the mix is complete.
func MixWAVFiles(path string, bits int, ceiling float32, inputs ...string) error {
	if len(inputs) == 0 {
		return errors.New("audio: nothing to mix")
	}
	var format WAVFormat
	var peak float32
	err := readMix(inputs, func(f WAVFormat, block []float32) error {
		format = f
		peak = max(peak, Peak(block))
		return nil
	})
	if err != nil {
		return err
	}
	gain := float32(1)
	if peak > ceiling && peak > 0 {
		gain = ceiling / peak
	}
	return regularfile.WriteAtomic(path, 0o644, func(out io.Writer) error {
		w, err := NewWAVWriter(out, format.Rate, format.Channels, bits)
		if err != nil {
			return fmt.Errorf("audio: %s: %w", path, err)
		}
		err = readMix(inputs, func(_ WAVFormat, block []float32) error {
			if gain != 1 {
				ApplyGain(block, gain)
			}
			if err := w.WriteSamples(block); err != nil {
				return fmt.Errorf("audio: %s: %w", path, err)
			}
			return nil
		})
		if cerr := w.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("audio: %s: %w", path, cerr)
		}
		return err
	})
}

// readMix reads the inputs in step and hands fn each block of their sum, until the
// longest ends. fn may change the block.
func readMix(inputs []string, fn func(WAVFormat, []float32) error) error {
	readers := make([]*WAVReader, len(inputs))
	for i, path := range inputs {
		fh, err := regularfile.Open(path)
		if err != nil {
			return fmt.Errorf("audio: %w", err)
		}
		defer fh.Close()
		if readers[i], err = NewWAVReader(fh); err != nil {
			return fmt.Errorf("audio: %s: %w", path, err)
		}
		if f, f0 := readers[i].Format(), readers[0].Format(); f.Rate != f0.Rate || f.Channels != f0.Channels {
			return fmt.Errorf("audio: %s is %d Hz x%d, %s is %d Hz x%d; resample first", path, f.Rate, f.Channels, inputs[0], f0.Rate, f0.Channels)
		}
	}
	format := readers[0].Format()
	sum := make([]float32, mixBlockFrames*format.Channels)
	block := make([]float32, len(sum))
	got := make([]int64, len(inputs)) // samples read from each input
	done := make([]bool, len(inputs))
	for {
		clear(sum)
		longest := 0
		for i, r := range readers {
			if done[i] {
				continue
			}
			n, err := readBlock(r, block)
			Mix(sum, block[:n], 0, 1)
			longest = max(longest, n)
			got[i] += int64(n)
			if errors.Is(err, io.EOF) {
				done[i] = true
				if got[i] == 0 {
					return fmt.Errorf("audio: %s: %w: no sample frames before the end of the input", inputs[i], ErrEmptyAudio)
				}
			} else if err != nil {
				return fmt.Errorf("audio: %s: %w", inputs[i], err)
			}
		}
		if longest > 0 {
			if err := fn(format, sum[:longest]); err != nil {
				return err
			}
		}
		if !slices.Contains(done, false) {
			return nil
		}
	}
}

// readBlock fills block as far as the audio goes; at the end it returns io.EOF with the
// samples read before it.
func readBlock(r *WAVReader, block []float32) (int, error) {
	n := 0
	for n < len(block) {
		m, err := r.Read(block[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
