package audio

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/parley-voice/parley/internal/regularfile"
)

// ErrWAVTooLarge is returned when audio would not fit the 4 GiB size fields of a RIFF
// WAV file.
var ErrWAVTooLarge = errors.New("audio too long for a WAV file (4 GiB limit)")

// maxRIFFSize is the largest RIFF size field a finished file may carry; 0xFFFFFFFF
// itself means "unknown".
const maxRIFFSize = sizeUnknown - 1

// WAVWriter writes a WAV file as audio arrives, for recordings of any length up to the
// 4 GiB limit of the format. The encoding is chosen by bits: 8, 16 or 24 for integer PCM,
// 32 or 64 for IEEE float.
//
// The header is written first with the sizes marked unknown (0xFFFFFFFF, as streaming
// writers do), so that a recording cut off by a crash can still be read by DecodeWAV
// up to where it stopped. Close fills in the real sizes when the destination can seek
// (a file); on a pipe the header keeps the unknown sizes, which readers that handle
// streamed WAV (including this package's) accept.
//
// A WAVWriter is not safe for concurrent use.
type WAVWriter struct {
	dst    io.Writer
	bw     *bufio.Writer
	seeker io.WriteSeeker // nil when dst cannot seek
	start  int64          // offset of the header in dst
	closer io.Closer      // the file CreateWAVFile opened, closed by Close

	enc       wavEncoding
	rate      int
	channels  int
	layout    wavLayout
	frames    int64
	dataBytes int64
	sized     bool // the header already holds the final sizes
	scratch   []byte
	err       error // sticky
	closed    bool
}

// wavEncoding is how samples are stored.
type wavEncoding struct {
	bits  int
	float bool
}

func encodingForBits(bits int) (wavEncoding, error) {
	switch bits {
	case 8, 16, 24:
		return wavEncoding{bits: bits}, nil
	case 32, 64:
		return wavEncoding{bits: bits, float: true}, nil
	}
	return wavEncoding{}, fmt.Errorf("audio: cannot write %d-bit WAV (use 8, 16 or 24 for integer PCM, 32 or 64 for float)", bits)
}

// wavLayout is where the size fields lie in a header, relative to its start.
type wavLayout struct {
	header   []byte
	riffSize int // offset of the RIFF size field
	factLen  int // offset of the fact chunk's frame count, 0 when there is none
	dataSize int // offset of the data chunk's size field
}

// NewWAVWriter writes a WAV header for audio at rate with channels to w and returns a
// writer for the samples. Close must be called to finish the file; it does not close w.
func NewWAVWriter(w io.Writer, rate, channels, bits int) (*WAVWriter, error) {
	return newWAVWriter(w, rate, channels, bits, -1)
}

// newWAVWriter writes the header; frames ≥ 0 is the final length when it is known now,
// so the header can carry the real sizes from the start.
func newWAVWriter(w io.Writer, rate, channels, bits int, frames int64) (*WAVWriter, error) {
	enc, err := encodingForBits(bits)
	if err != nil {
		return nil, err
	}
	if rate < 1 || rate > maxWAVRate {
		return nil, fmt.Errorf("audio: cannot write a WAV file at %d Hz", rate)
	}
	if channels < 1 || channels > maxWAVChannels {
		return nil, fmt.Errorf("audio: cannot write a WAV file with %d channels", channels)
	}
	ww := &WAVWriter{dst: w, enc: enc, rate: rate, channels: channels}
	ww.layout = wavHeader(rate, channels, enc)
	if frames >= 0 {
		if err := ww.patchSizes(ww.layout.header, frames); err != nil {
			return nil, err
		}
		ww.sized = true
	} else if s, ok := w.(io.WriteSeeker); ok {
		// A pipe passed as an *os.File implements Seek but fails at it.
		if off, err := s.Seek(0, io.SeekCurrent); err == nil {
			ww.seeker, ww.start = s, off
		}
	}
	ww.bw = bufio.NewWriterSize(w, 64<<10)
	if _, err := ww.bw.Write(ww.layout.header); err != nil {
		return nil, fmt.Errorf("audio: writing WAV header: %w", err)
	}
	return ww, nil
}

// CreateWAVFile creates (or empties) the regular file at path and returns a writer for
// it; Close finishes the header and closes the file. A device, a FIFO or a symbolic
// link at path is refused and left as it is.
func CreateWAVFile(path string, rate, channels, bits int) (*WAVWriter, error) {
	fh, err := regularfile.Create(path, 0o644)
	if err != nil {
		return nil, fmt.Errorf("audio: %w", err)
	}
	w, err := NewWAVWriter(fh, rate, channels, bits)
	if err != nil {
		fh.Close()
		os.Remove(path)
		return nil, err
	}
	w.closer = fh
	return w, nil
}

// wavHeader builds a header with unknown sizes. Plain PCM (WAVE_FORMAT_PCM) is used for
// mono and stereo up to 16 bits and IEEE float (format 3) for mono and stereo floats;
// everything else gets WAVE_FORMAT_EXTENSIBLE, which is what the format's authors ask
// for beyond two channels or 16 bits.
func wavHeader(rate, channels int, enc wavEncoding) wavLayout {
	container := enc.bits / 8
	blockAlign := channels * container
	extensible := channels > 2 || (!enc.float && enc.bits > 16)
	tag := uint16(wavFormatPCM)
	if enc.float {
		tag = wavFormatFloat
	}
	le := binary.LittleEndian

	var fmtBody []byte
	fmtBody = le.AppendUint16(fmtBody, tag)
	fmtBody = le.AppendUint16(fmtBody, uint16(channels))
	fmtBody = le.AppendUint32(fmtBody, uint32(rate))
	fmtBody = le.AppendUint32(fmtBody, uint32(rate*blockAlign))
	fmtBody = le.AppendUint16(fmtBody, uint16(blockAlign))
	fmtBody = le.AppendUint16(fmtBody, uint16(enc.bits))
	switch {
	case extensible:
		le.PutUint16(fmtBody[0:2], wavFormatExtensible)
		fmtBody = le.AppendUint16(fmtBody, 22) // extension size
		fmtBody = le.AppendUint16(fmtBody, uint16(enc.bits))
		fmtBody = le.AppendUint32(fmtBody, channelMask(channels))
		fmtBody = le.AppendUint16(fmtBody, tag)
		fmtBody = append(fmtBody, extensibleGUIDTail[:]...)
	case enc.float:
		fmtBody = le.AppendUint16(fmtBody, 0) // non-PCM formats carry an extension size
	}

	var l wavLayout
	h := []byte("RIFF")
	l.riffSize = len(h)
	h = le.AppendUint32(h, sizeUnknown)
	h = append(h, "WAVEfmt "...)
	h = le.AppendUint32(h, uint32(len(fmtBody)))
	h = append(h, fmtBody...)
	if enc.float {
		// Non-PCM files are expected to say their length in frames in a fact chunk.
		h = append(h, "fact"...)
		h = le.AppendUint32(h, 4)
		l.factLen = len(h)
		h = le.AppendUint32(h, sizeUnknown)
	}
	h = append(h, "data"...)
	l.dataSize = len(h)
	h = le.AppendUint32(h, sizeUnknown)
	l.header = h
	return l
}

// channelMask assigns the first channels to the standard speaker positions in order,
// the usual default when nothing more is known; mono is front centre.
func channelMask(channels int) uint32 {
	switch {
	case channels == 1:
		return 0x4
	case channels <= 18:
		return 1<<channels - 1
	}
	return 0
}

// patchSizes writes the sizes for frames into a copy of the header.
func (w *WAVWriter) patchSizes(header []byte, frames int64) error {
	data := frames * int64(w.channels*w.enc.bits/8)
	riff := int64(len(w.layout.header)) - 8 + data + data&1
	if riff > maxRIFFSize {
		return fmt.Errorf("audio: %w: %d frames", ErrWAVTooLarge, frames)
	}
	le := binary.LittleEndian
	le.PutUint32(header[w.layout.riffSize:], uint32(riff))
	le.PutUint32(header[w.layout.dataSize:], uint32(data))
	if w.layout.factLen > 0 {
		le.PutUint32(header[w.layout.factLen:], uint32(min(frames, maxRIFFSize)))
	}
	return nil
}

// Write appends a frame's samples. The frame's channel count and rate must match the
// file's (a frame of another rate would play at the wrong speed); Start is ignored, the
// samples simply follow the ones written before.
func (w *WAVWriter) Write(f Frame) error {
	if f.Channels != w.channels || f.Rate != w.rate {
		return fmt.Errorf("audio: WAV writer is %d Hz x%d, frame is %d Hz x%d", w.rate, w.channels, f.Rate, f.Channels)
	}
	return w.WriteSamples(f.Samples)
}

// WriteSamples appends interleaved samples; their number must be a multiple of the
// channel count. Integer encodings clip samples outside [-1, 1].
func (w *WAVWriter) WriteSamples(samples []float32) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("audio: WAV writer is closed")
	}
	if len(samples)%w.channels != 0 {
		return fmt.Errorf("audio: %d samples are not whole frames of %d channels", len(samples), w.channels)
	}
	frames := int64(len(samples) / w.channels)
	container := w.enc.bits / 8
	newData := w.dataBytes + frames*int64(w.channels*container)
	if int64(len(w.layout.header))-8+newData+newData&1 > maxRIFFSize {
		w.err = fmt.Errorf("audio: %w", ErrWAVTooLarge)
		return w.err
	}
	const block = 4096
	for len(samples) > 0 {
		n := min(len(samples), block)
		w.scratch = encodeSamples(w.scratch[:0], samples[:n], w.enc)
		if _, err := w.bw.Write(w.scratch); err != nil {
			w.err = fmt.Errorf("audio: writing WAV data: %w", err)
			return w.err
		}
		samples = samples[n:]
	}
	w.frames += frames
	w.dataBytes = newData
	return nil
}

// Frames returns the number of sample frames written so far.
func (w *WAVWriter) Frames() int64 { return w.frames }

// Close pads the data to an even size, fills in the header's sizes where the destination
// can seek, flushes, and closes the file CreateWAVFile opened (without fsync: a
// recording is not worth stalling the audio path on a slow disk). It reports the first
// error of the writer's life.
func (w *WAVWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	err := w.finish()
	if w.closer != nil {
		if cerr := w.closer.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("audio: %w", cerr)
		}
	}
	if w.err == nil {
		w.err = err
	}
	return w.err
}

func (w *WAVWriter) finish() error {
	if w.err != nil {
		return w.err
	}
	if w.dataBytes&1 == 1 {
		if err := w.bw.WriteByte(0); err != nil {
			return fmt.Errorf("audio: writing WAV data: %w", err)
		}
	}
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("audio: writing WAV data: %w", err)
	}
	if w.sized || w.seeker == nil {
		return nil
	}
	header := append([]byte(nil), w.layout.header...)
	if err := w.patchSizes(header, w.frames); err != nil {
		return err
	}
	end := w.start + int64(len(header)) + w.dataBytes + w.dataBytes&1
	for _, off := range []int{w.layout.riffSize, w.layout.factLen, w.layout.dataSize} {
		if off == 0 {
			continue
		}
		if _, err := w.seeker.Seek(w.start+int64(off), io.SeekStart); err != nil {
			return fmt.Errorf("audio: finishing WAV header: %w", err)
		}
		if _, err := w.seeker.Write(header[off : off+4]); err != nil {
			return fmt.Errorf("audio: finishing WAV header: %w", err)
		}
	}
	if _, err := w.seeker.Seek(end, io.SeekStart); err != nil {
		return fmt.Errorf("audio: finishing WAV header: %w", err)
	}
	return nil
}

// encodeSamples appends samples in the given encoding, little-endian.
func encodeSamples(dst []byte, samples []float32, enc wavEncoding) []byte {
	le := binary.LittleEndian
	switch {
	case enc.float && enc.bits == 32:
		for _, s := range samples {
			dst = le.AppendUint32(dst, math.Float32bits(s))
		}
	case enc.float:
		for _, s := range samples {
			dst = le.AppendUint64(dst, math.Float64bits(float64(s)))
		}
	case enc.bits == 8:
		for _, s := range samples {
			dst = append(dst, byte(quantize(s, 1<<7)+128))
		}
	case enc.bits == 16:
		for _, s := range samples {
			dst = le.AppendUint16(dst, uint16(int16(quantize(s, 1<<15))))
		}
	default: // 24
		for _, s := range samples {
			v := quantize(s, 1<<23)
			dst = append(dst, byte(v), byte(v>>8), byte(v>>16))
		}
	}
	return dst
}

// quantize scales s by full (2^(bits-1)), rounds, and clips to the integer range. The
// decoder divides by the same full scale, so integer samples survive a round trip
// exactly.
func quantize(s float32, full int32) int32 {
	v := math.Round(float64(s) * float64(full))
	switch {
	case v != v:
		return 0
	case v >= float64(full-1):
		return full - 1
	case v <= -float64(full):
		return -full
	}
	return int32(v)
}

// EncodeWAV writes f as a complete WAV file in the encoding bits selects (8, 16, 24 for
// integer PCM, 32 or 64 for float). Integer encodings clip samples outside [-1, 1].
func EncodeWAV(w io.Writer, f Frame, bits int) error {
	if f.Channels < 1 {
		return fmt.Errorf("audio: cannot encode a frame with %d channels", f.Channels)
	}
	if len(f.Samples)%f.Channels != 0 {
		return fmt.Errorf("audio: %d samples are not whole frames of %d channels", len(f.Samples), f.Channels)
	}
	ww, err := newWAVWriter(w, f.Rate, f.Channels, bits, int64(f.Len()))
	if err != nil {
		return err
	}
	if err := ww.WriteSamples(f.Samples); err != nil {
		return err
	}
	return ww.Close()
}

// WriteWAVFile writes f to path as a WAV file, atomically: it writes a temporary file
// in the same directory and renames it over path only once it is complete and synced,
// so that readers never see half a file and a failed write leaves the old one intact.
// Only a regular file or a new path is written: a device, a FIFO or a symbolic link at
// path is refused and left as it is (see internal/regularfile; EncodeWAV streams to
// one).
func WriteWAVFile(path string, f Frame, bits int) error {
	if err := regularfile.WriteAtomic(path, 0o644, func(w io.Writer) error { return EncodeWAV(w, f, bits) }); err != nil {
		return fmt.Errorf("audio: %w", err)
	}
	return nil
}
