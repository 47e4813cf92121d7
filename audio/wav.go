package audio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/parley-voice/parley/internal/regularfile"
)

// Errors the WAV reader wraps, so that callers can tell what went wrong with errors.Is.
var (
	// ErrNotWAV: the input is not a RIFF/WAVE (or RF64/BW64) file at all.
	ErrNotWAV = errors.New("not a WAV file")
	// ErrCorrupt: the input is a WAV file whose structure is broken (a short or
	// inconsistent fmt chunk, audio data before the format, ...).
	ErrCorrupt = errors.New("corrupt WAV file")
	// ErrUnsupportedFormat: a well-formed WAV file in an encoding this package does not
	// decode (compressed formats, odd sample sizes, absurd channel counts or rates).
	ErrUnsupportedFormat = errors.New("unsupported WAV format")
	// ErrTruncated: the input ended before the audio data it declared. The samples before
	// the cut are still returned.
	ErrTruncated = errors.New("truncated WAV file")
	// ErrEmptyAudio: the file holds no audio samples.
	ErrEmptyAudio = errors.New("WAV file holds no audio")
)

// WAV format tags (the wFormatTag of the fmt chunk).
const (
	wavFormatPCM        = 0x0001
	wavFormatFloat      = 0x0003
	wavFormatALaw       = 0x0006
	wavFormatMuLaw      = 0x0007
	wavFormatExtensible = 0xFFFE
)

// Limits that keep a hostile or corrupt header from making the decoder allocate absurd
// buffers. They are far beyond anything a microphone or a speech corpus produces.
const (
	maxWAVChannels = 1024
	maxWAVRate     = 10_000_000
	// maxPrealloc caps how many samples DecodeWAV reserves up front from a header's
	// claim; bigger files still decode, the slice just grows as data really arrives.
	maxPrealloc = 1 << 24
	// fmtChunkMax is the most of a fmt chunk that is kept; the rest is skipped.
	fmtChunkMax = 256
	// readChunkBytes is how much raw audio one Read fetches at most.
	readChunkBytes = 64 << 10
)

// sizeUnknown in a RIFF or data size field means the writer did not know the length
// (a stream, or a recording that was never finalised).
const sizeUnknown = 0xFFFFFFFF

// extensibleGUIDTail is the part of the KSDATAFORMAT_SUBTYPE_* GUIDs after the leading
// format tag, as it lies in the file: {XXXXXXXX-0000-0010-8000-00AA00389B71}.
var extensibleGUIDTail = [14]byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71}

// WAVFormat describes the audio in a WAV file.
type WAVFormat struct {
	Rate     int
	Channels int
	// BitsPerSample is the number of meaningful bits per sample (wValidBitsPerSample for
	// WAVE_FORMAT_EXTENSIBLE); samples are stored in whole bytes.
	BitsPerSample int
	// Float is true for IEEE float samples, false for integer PCM.
	Float bool
	// Frames is the number of sample frames (samples per channel) the file declares, or
	// -1 when the writer left the length open (a streamed file); then the audio runs
	// to the end of the input.
	Frames int64
}

// Duration returns the declared length, or -1 when it is unknown.
func (f WAVFormat) Duration() time.Duration {
	if f.Frames < 0 {
		return -1
	}
	return SamplesToDuration(f.Frames, f.Rate)
}

// WAVReader decodes the audio of a WAV file as it streams in, a block at a time, so that
// hour-long recordings never have to sit in memory. Samples come out as float32 in
// [-1, 1] (float files may exceed that range), interleaved by channel.
//
// Supported: integer PCM in 8, 16, 24 and 32-bit containers (narrower valid bit depths
// such as 20 bits in 24 are decoded by their container), IEEE float 32 and 64-bit,
// WAVE_FORMAT_EXTENSIBLE carrying either, any channel count up to 1024, and RF64/BW64
// files with 64-bit sizes. Unknown chunks are skipped, whether before or after fmt.
type WAVReader struct {
	src    *bufio.Reader
	format WAVFormat
	// container is the number of bytes each sample occupies; blockAlign is a whole frame.
	container  int
	blockAlign int
	// dataSize is the declared size of the data chunk in bytes, -1 when unknown.
	dataSize int64
	consumed int64 // bytes of the data chunk read so far

	buf   []byte // raw bytes; buf[:carry] is an incomplete frame kept from the last read
	carry int
	err   error // sticky: once set, every later Read returns it
}

// NewWAVReader parses the WAV header from r and returns a reader positioned at the first
// sample. A file whose declared audio is empty is reported as ErrEmptyAudio.
func NewWAVReader(r io.Reader) (*WAVReader, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 32<<10)
	}
	w := &WAVReader{src: br, dataSize: -1}
	if err := w.readHeader(); err != nil {
		return nil, err
	}
	return w, nil
}

// Format returns the format of the audio being read.
func (w *WAVReader) Format() WAVFormat { return w.format }

// header holds what the chunk walk learned before the data chunk.
type riffHeader struct {
	rf64 bool
	// riffSize is the declared size of everything after the RIFF size field, -1 when
	// the writer left it open.
	riffSize int64
	// ds64Data is the data chunk size from an RF64 ds64 chunk (-1 when absent).
	ds64Data int64
	walked   int64 // bytes of the RIFF body read so far (after "WAVE")
	haveFmt  bool
}

func (w *WAVReader) readHeader() error {
	var head [12]byte
	if n, err := io.ReadFull(w.src, head[:]); err != nil {
		if n == 0 {
			return fmt.Errorf("%w: empty input", ErrNotWAV)
		}
		if n >= 4 && !isRIFFTag(head[:4]) {
			return fmt.Errorf("%w: starts with %q", ErrNotWAV, head[:4])
		}
		return fmt.Errorf("%w: input ends inside the %d-byte RIFF header after %d bytes", ErrTruncated, len(head), n)
	}
	h := riffHeader{riffSize: -1, ds64Data: -1}
	switch string(head[:4]) {
	case "RIFF":
	case "RF64", "BW64":
		h.rf64 = true
	case "RIFX":
		return fmt.Errorf("%w: big-endian RIFX files are not supported", ErrUnsupportedFormat)
	default:
		return fmt.Errorf("%w: starts with %q, not \"RIFF\"", ErrNotWAV, head[:4])
	}
	if string(head[8:12]) != "WAVE" {
		return fmt.Errorf("%w: RIFF form type is %q, not \"WAVE\"", ErrNotWAV, head[8:12])
	}
	if size := binary.LittleEndian.Uint32(head[4:8]); size != 0 && size != sizeUnknown {
		h.riffSize = int64(size)
	}

	for {
		id, size, err := w.chunkHeader(&h)
		if err != nil {
			return err
		}
		switch id {
		case "ds64":
			if err := w.readDS64(&h, size); err != nil {
				return err
			}
		case "fmt ":
			if err := w.readFmt(&h, size); err != nil {
				return err
			}
		case "data":
			return w.startData(&h, size)
		default:
			if err := w.skipChunk(&h, id, size); err != nil {
				return err
			}
		}
	}
}

// isRIFFTag reports whether b begins like one of the RIFF container tags.
func isRIFFTag(b []byte) bool {
	s := string(b)
	return s == "RIFF" || s == "RF64" || s == "BW64" || s == "RIFX"
}

// chunkHeader reads the next chunk's id and size; running out of input here means the
// file has no (complete) data chunk.
func (w *WAVReader) chunkHeader(h *riffHeader) (string, uint32, error) {
	var ch [8]byte
	n, err := io.ReadFull(w.src, ch[:])
	h.walked += int64(n)
	if err != nil {
		if n == 0 && (h.riffSize < 0 || h.walked+4 >= h.riffSize) {
			// The file ended cleanly where the RIFF size said it would.
			if !h.haveFmt {
				return "", 0, fmt.Errorf("%w: no fmt chunk and no data chunk", ErrEmptyAudio)
			}
			return "", 0, fmt.Errorf("%w: no data chunk", ErrEmptyAudio)
		}
		return "", 0, fmt.Errorf("%w: input ends inside the chunk list before any audio data", ErrTruncated)
	}
	return string(ch[:4]), binary.LittleEndian.Uint32(ch[4:]), nil
}

func (w *WAVReader) readDS64(h *riffHeader, size uint32) error {
	if !h.rf64 {
		return w.skipChunk(h, "ds64", size)
	}
	if size < 24 {
		return fmt.Errorf("%w: ds64 chunk of %d bytes is shorter than 24", ErrCorrupt, size)
	}
	var b [24]byte
	if err := w.readChunkBody(h, "ds64", b[:]); err != nil {
		return err
	}
	if riff := binary.LittleEndian.Uint64(b[0:8]); riff > 0 && riff < math.MaxInt64 {
		h.riffSize = int64(riff)
	}
	if data := binary.LittleEndian.Uint64(b[8:16]); data < math.MaxInt64 {
		h.ds64Data = int64(data)
	}
	if err := w.discard(h, "ds64", int64(size)-24); err != nil {
		return err
	}
	return w.skipPad(h, size)
}

func (w *WAVReader) readFmt(h *riffHeader, size uint32) error {
	if size < 16 {
		return fmt.Errorf("%w: fmt chunk of %d bytes is shorter than 16", ErrCorrupt, size)
	}
	keep := min(int(size), fmtChunkMax)
	b := make([]byte, keep)
	if err := w.readChunkBody(h, "fmt", b); err != nil {
		return err
	}
	if err := w.discard(h, "fmt", int64(size)-int64(keep)); err != nil {
		return err
	}
	if err := w.skipPad(h, size); err != nil {
		return err
	}
	if h.haveFmt {
		return fmt.Errorf("%w: two fmt chunks", ErrCorrupt)
	}
	h.haveFmt = true

	tag := binary.LittleEndian.Uint16(b[0:2])
	channels := int(binary.LittleEndian.Uint16(b[2:4]))
	rate := int64(binary.LittleEndian.Uint32(b[4:8]))
	blockAlign := int(binary.LittleEndian.Uint16(b[12:14]))
	bits := int(binary.LittleEndian.Uint16(b[14:16]))
	validBits := bits

	if tag == wavFormatExtensible {
		if len(b) < 40 {
			return fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE fmt chunk of %d bytes is shorter than 40", ErrCorrupt, size)
		}
		if cb := binary.LittleEndian.Uint16(b[16:18]); cb < 22 {
			return fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE with %d extension bytes (need 22)", ErrCorrupt, cb)
		}
		if v := int(binary.LittleEndian.Uint16(b[18:20])); v != 0 {
			validBits = v
		}
		if !bytes.Equal(b[26:40], extensibleGUIDTail[:]) {
			return fmt.Errorf("%w: WAVE_FORMAT_EXTENSIBLE sub-format GUID % x is not a standard PCM or float GUID", ErrUnsupportedFormat, b[24:40])
		}
		tag = binary.LittleEndian.Uint16(b[24:26])
	}

	var float bool
	switch tag {
	case wavFormatPCM:
	case wavFormatFloat:
		float = true
	case wavFormatALaw:
		return fmt.Errorf("%w: A-law (format 6); convert it to PCM first", ErrUnsupportedFormat)
	case wavFormatMuLaw:
		return fmt.Errorf("%w: µ-law (format 7); convert it to PCM first", ErrUnsupportedFormat)
	default:
		return fmt.Errorf("%w: format tag 0x%04x (compressed audio); convert it to PCM first", ErrUnsupportedFormat, tag)
	}
	if channels < 1 {
		return fmt.Errorf("%w: %d channels", ErrCorrupt, channels)
	}
	if channels > maxWAVChannels {
		return fmt.Errorf("%w: %d channels (at most %d)", ErrUnsupportedFormat, channels, maxWAVChannels)
	}
	if rate < 1 || rate > maxWAVRate {
		return fmt.Errorf("%w: sample rate %d Hz", ErrUnsupportedFormat, rate)
	}
	if bits < 1 {
		return fmt.Errorf("%w: %d bits per sample", ErrCorrupt, bits)
	}
	if validBits > bits {
		return fmt.Errorf("%w: %d valid bits in a %d-bit sample", ErrCorrupt, validBits, bits)
	}

	// The container size comes from bits per sample rounded up to whole bytes. A few
	// writers store, say, 12-bit audio with bitsPerSample 12 and a 2-byte container;
	// the block align is the tie-breaker when it names a consistent larger container.
	container := (bits + 7) / 8
	if blockAlign != channels*container && blockAlign > 0 && blockAlign%channels == 0 {
		if c := blockAlign / channels; c > container && c <= 8 {
			container = c
		}
	}
	switch {
	case float && container != 4 && container != 8:
		return fmt.Errorf("%w: %d-bit float samples (only 32 and 64)", ErrUnsupportedFormat, bits)
	case !float && container > 4:
		return fmt.Errorf("%w: %d-bit integer samples (at most 32)", ErrUnsupportedFormat, bits)
	}
	// The block align must describe whole frames of whole containers; anything else
	// means the fields contradict each other and the data cannot be framed.
	if blockAlign != channels*container {
		return fmt.Errorf("%w: block align %d does not match %d channels of %d-byte samples", ErrCorrupt, blockAlign, channels, container)
	}
	w.container = container
	w.blockAlign = blockAlign
	w.format = WAVFormat{Rate: int(rate), Channels: channels, BitsPerSample: validBits, Float: float, Frames: -1}
	return nil
}

func (w *WAVReader) startData(h *riffHeader, size uint32) error {
	if !h.haveFmt {
		return fmt.Errorf("%w: audio data before the fmt chunk", ErrCorrupt)
	}
	switch {
	case h.rf64 && size == sizeUnknown && h.ds64Data >= 0:
		w.dataSize = h.ds64Data
	case size == sizeUnknown:
		w.dataSize = -1
	case size == 0 && h.riffSize < 0:
		// A streaming writer that never came back to fill in the sizes.
		w.dataSize = -1
	default:
		w.dataSize = int64(size)
	}
	if w.dataSize >= 0 {
		w.format.Frames = w.dataSize / int64(w.blockAlign)
		if w.format.Frames == 0 {
			return fmt.Errorf("%w: the data chunk holds %d bytes, less than one %d-byte sample frame", ErrEmptyAudio, w.dataSize, w.blockAlign)
		}
	}
	w.buf = make([]byte, max(readChunkBytes/w.blockAlign, 1)*w.blockAlign)
	return nil
}

// skipChunk skips a chunk this reader does not need, including its pad byte.
func (w *WAVReader) skipChunk(h *riffHeader, id string, size uint32) error {
	if err := w.discard(h, id, int64(size)); err != nil {
		return err
	}
	return w.skipPad(h, size)
}

// skipPad skips the pad byte that follows a chunk of odd size. The pad should be zero;
// some writers forget it, so a non-zero byte that starts a plausible chunk id is taken
// to be the next chunk rather than a pad.
func (w *WAVReader) skipPad(h *riffHeader, size uint32) error {
	if size&1 == 0 {
		return nil
	}
	if p, err := w.src.Peek(4); err == nil && p[0] != 0 && isChunkID(p) {
		return nil
	}
	_, err := w.src.ReadByte()
	if err == nil {
		h.walked++
		return nil
	}
	if errors.Is(err, io.EOF) {
		return nil // the next chunk header read reports the end properly
	}
	return fmt.Errorf("audio: reading WAV: %w", err)
}

// isChunkID reports whether b looks like a RIFF chunk id: four printable ASCII bytes.
func isChunkID(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

func (w *WAVReader) readChunkBody(h *riffHeader, id string, b []byte) error {
	n, err := io.ReadFull(w.src, b)
	h.walked += int64(n)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: input ends inside the %q chunk", ErrTruncated, id)
		}
		return fmt.Errorf("audio: reading WAV %q chunk: %w", id, err)
	}
	return nil
}

func (w *WAVReader) discard(h *riffHeader, id string, n int64) error {
	if n <= 0 {
		return nil
	}
	got, err := io.CopyN(io.Discard, w.src, n)
	h.walked += got
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: input ends inside the %q chunk (%d of %d bytes)", ErrTruncated, id, got, n)
		}
		return fmt.Errorf("audio: reading WAV %q chunk: %w", id, err)
	}
	return nil
}

// Read decodes up to len(dst) samples into dst, whole frames only, and returns how many
// it wrote (a multiple of the channel count). At the end of the audio it returns io.EOF;
// if the input ended before the declared end, it returns the decoded samples first and
// then an error wrapping ErrTruncated. dst must hold at least one frame
// (io.ErrShortBuffer otherwise).
func (w *WAVReader) Read(dst []float32) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if len(dst) == 0 {
		return 0, nil
	}
	ch := w.format.Channels
	frames := len(dst) / ch
	if frames == 0 {
		return 0, io.ErrShortBuffer
	}
	ba := w.blockAlign
	frames = min(frames, len(w.buf)/ba)
	want := frames * ba
	if w.dataSize >= 0 {
		left := w.dataSize - w.consumed + int64(w.carry)
		if left < int64(ba) {
			// Fewer bytes than a frame left in the declared data: a writer that
			// declared a size that is not a whole number of frames. Nothing to decode.
			w.err = io.EOF
			return 0, w.err
		}
		if int64(want) > left {
			want = int(left / int64(ba) * int64(ba))
		}
	}

	// Fetch at least one whole frame (unless the input ends), at most want bytes.
	toRead := want - w.carry
	if w.dataSize >= 0 {
		toRead = int(min(int64(toRead), w.dataSize-w.consumed))
	}
	n, err := io.ReadAtLeast(w.src, w.buf[w.carry:w.carry+toRead], min(ba-w.carry, toRead))
	w.consumed += int64(n)
	have := w.carry + n
	whole := have / ba
	decoded := w.decode(dst, w.buf[:whole*ba])
	w.carry = copy(w.buf, w.buf[whole*ba:have])

	if err != nil {
		w.err = w.endError(err)
	}
	if decoded > 0 {
		return decoded, nil
	}
	if w.err == nil {
		// Cannot happen: ReadAtLeast either delivered a frame or failed.
		w.err = fmt.Errorf("audio: WAV reader made no progress")
	}
	return 0, w.err
}

// endError turns the error that ended the input into the reader's final error.
func (w *WAVReader) endError(err error) error {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("audio: reading WAV data: %w", err)
	}
	if w.dataSize >= 0 && w.consumed < w.dataSize {
		return fmt.Errorf("%w: the data chunk declares %d bytes but the input ends after %d", ErrTruncated, w.dataSize, w.consumed)
	}
	if w.carry > 0 {
		return fmt.Errorf("%w: the input ends inside a sample frame (%d of %d bytes)", ErrTruncated, w.carry, w.blockAlign)
	}
	return io.EOF
}

// decode converts whole frames of raw bytes into samples and returns how many it wrote.
func (w *WAVReader) decode(dst []float32, raw []byte) int {
	n := len(raw) / w.container
	dst = dst[:n]
	switch {
	case w.format.Float && w.container == 4:
		for i := range dst {
			dst[i] = finite32(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	case w.format.Float:
		for i := range dst {
			dst[i] = finite32(float32(math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))))
		}
	case w.container == 1:
		for i := range dst {
			dst[i] = (float32(raw[i]) - 128) / 128 // 8-bit WAV is unsigned, centred on 128
		}
	case w.container == 2:
		for i := range dst {
			dst[i] = float32(int16(binary.LittleEndian.Uint16(raw[2*i:]))) / (1 << 15)
		}
	case w.container == 3:
		for i := range dst {
			b := raw[3*i:]
			v := int32(uint32(b[0])<<8|uint32(b[1])<<16|uint32(b[2])<<24) >> 8
			dst[i] = float32(v) / (1 << 23)
		}
	default: // 4-byte integers
		for i := range dst {
			dst[i] = float32(float64(int32(binary.LittleEndian.Uint32(raw[4*i:]))) / (1 << 31))
		}
	}
	return n
}

// finite32 replaces NaN with silence and infinities with full scale: one broken sample
// in a float file must not poison every filter downstream with NaNs.
func finite32(v float32) float32 {
	switch {
	case v != v:
		return 0
	case v > math.MaxFloat32:
		return 1
	case v < -math.MaxFloat32:
		return -1
	}
	return v
}

// DecodeWAV reads a whole WAV file into a Frame at its own rate and channel count, with
// Start 0. A truncated file returns the samples before the cut together with an error
// wrapping ErrTruncated; a file without samples returns ErrEmptyAudio.
func DecodeWAV(r io.Reader) (Frame, error) {
	wr, err := NewWAVReader(r)
	if err != nil {
		return Frame{}, err
	}
	format := wr.Format()
	f := Frame{Rate: format.Rate, Channels: format.Channels}
	if format.Frames > 0 {
		f.Samples = make([]float32, 0, min(format.Frames*int64(format.Channels), maxPrealloc))
	}
	chunk := make([]float32, max(4096, format.Channels)/format.Channels*format.Channels)
	for {
		n, err := wr.Read(chunk)
		f.Samples = append(f.Samples, chunk[:n]...)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return f, err
		}
	}
	if len(f.Samples) == 0 {
		return f, fmt.Errorf("%w: no sample frames before the end of the input", ErrEmptyAudio)
	}
	return f, nil
}

// DecodeWAVFile is DecodeWAV on a file; errors name the file.
func DecodeWAVFile(path string) (Frame, error) {
	fh, err := regularfile.Open(path)
	if err != nil {
		return Frame{}, fmt.Errorf("audio: %w", err)
	}
	defer fh.Close()
	f, err := DecodeWAV(fh)
	if err != nil {
		return f, fmt.Errorf("audio: %s: %w", path, err)
	}
	return f, nil
}

// StatWAVFile reads a WAV file's header and checks, from the file's size, that the audio
// it declares is all there, without decoding it. It reports ErrTruncated for a file
// that was cut short and ErrEmptyAudio for one without samples, so that a caller can
// reject a bad recording before it starts streaming it.
func StatWAVFile(path string) (WAVFormat, error) {
	fh, err := regularfile.Open(path)
	if err != nil {
		return WAVFormat{}, fmt.Errorf("audio: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return WAVFormat{}, fmt.Errorf("audio: %w", err)
	}
	cr := &countingReader{r: fh}
	wr, err := NewWAVReader(cr)
	if err != nil {
		return WAVFormat{}, fmt.Errorf("audio: %s: %w", path, err)
	}
	format := wr.Format()
	if wr.dataSize >= 0 {
		// Everything read so far minus what the reader buffered ahead is the header.
		dataStart := cr.n - int64(wr.src.Buffered())
		if have := st.Size() - dataStart; have < wr.dataSize {
			return format, fmt.Errorf("audio: %s: %w: the data chunk declares %d bytes but the file holds %d", path, ErrTruncated, wr.dataSize, max(have, 0))
		}
	} else if st.Size() <= cr.n-int64(wr.src.Buffered()) {
		return format, fmt.Errorf("audio: %s: %w: no bytes after the header", path, ErrEmptyAudio)
	}
	return format, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
