package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/internal/testenv"
)

// --- helpers that build WAV files by hand -------------------------------------------

// chunk is one RIFF chunk for a hand-built file. size overrides the size field when
// non-nil; noPad leaves out the pad byte of an odd-sized chunk (a known writer bug).
type chunk struct {
	id    string
	body  []byte
	size  *uint32
	noPad bool
}

func u32(v uint32) *uint32 { return &v }

// buildRIFF assembles a file; riffSize < 0 means the correct size.
func buildRIFF(tag string, riffSize int64, chunks ...chunk) []byte {
	var body []byte
	body = append(body, "WAVE"...)
	for _, c := range chunks {
		body = append(body, c.id...)
		size := uint32(len(c.body))
		if c.size != nil {
			size = *c.size
		}
		body = binary.LittleEndian.AppendUint32(body, size)
		body = append(body, c.body...)
		if len(c.body)%2 == 1 && !c.noPad {
			body = append(body, 0)
		}
	}
	out := []byte(tag)
	if riffSize < 0 {
		riffSize = int64(len(body))
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(riffSize))
	return append(out, body...)
}

func fmtBody(tag uint16, channels, rate, bits, blockAlign int) []byte {
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint16(b, tag)
	b = le.AppendUint16(b, uint16(channels))
	b = le.AppendUint32(b, uint32(rate))
	b = le.AppendUint32(b, uint32(rate*blockAlign))
	b = le.AppendUint16(b, uint16(blockAlign))
	b = le.AppendUint16(b, uint16(bits))
	return b
}

func fmtExtensible(sub uint16, channels, rate, bits, validBits, blockAlign int, guidTail []byte) []byte {
	le := binary.LittleEndian
	b := fmtBody(wavFormatExtensible, channels, rate, bits, blockAlign)
	b = le.AppendUint16(b, 22)
	b = le.AppendUint16(b, uint16(validBits))
	b = le.AppendUint32(b, 0)
	b = le.AppendUint16(b, sub)
	return append(b, guidTail...)
}

func pcm16(vals ...int16) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint16(b, uint16(v))
	}
	return b
}

func float32Bytes(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func float64Bytes(vals ...float64) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

func int24Bytes(vals ...int32) []byte {
	var b []byte
	for _, v := range vals {
		b = append(b, byte(v), byte(v>>8), byte(v>>16))
	}
	return b
}

func int32Bytes(vals ...int32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

var fmtMono16k16 = chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 1, 16000, 16, 2)}

// --- decoding hand-made files -----------------------------------------------------------

func TestDecodeWAVVariants(t *testing.T) {
	guid := extensibleGUIDTail[:]
	badGUID := append([]byte{0xde, 0xad}, guid[2:]...)
	tests := []struct {
		name    string
		file    []byte
		want    []float32
		format  WAVFormat
		wantErr error
	}{
		{
			name:   "pcm16 mono",
			file:   buildRIFF("RIFF", -1, fmtMono16k16, chunk{id: "data", body: pcm16(0, 16384, -32768, 32767)}),
			want:   []float32{0, 0.5, -1, 32767.0 / 32768},
			format: WAVFormat{Rate: 16000, Channels: 1, BitsPerSample: 16, Frames: 4},
		},
		{
			name:   "pcm8 unsigned stereo",
			file:   buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 2, 8000, 8, 2)}, chunk{id: "data", body: []byte{128, 0, 255, 192}}),
			want:   []float32{0, -1, 127.0 / 128, 0.5},
			format: WAVFormat{Rate: 8000, Channels: 2, BitsPerSample: 8, Frames: 2},
		},
		{
			name:   "pcm8 odd data size is padded",
			file:   buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 1, 8000, 8, 1)}, chunk{id: "data", body: []byte{128, 0, 255}}, chunk{id: "LIST", body: []byte("INFOxxxx")}),
			want:   []float32{0, -1, 127.0 / 128},
			format: WAVFormat{Rate: 8000, Channels: 1, BitsPerSample: 8, Frames: 3},
		},
		{
			name:   "pcm24",
			file:   buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 1, 48000, 24, 3)}, chunk{id: "data", body: int24Bytes(0, 1<<22, -(1 << 23), 1<<23-1)}),
			want:   []float32{0, 0.5, -1, float32(float64(1<<23-1) / (1 << 23))},
			format: WAVFormat{Rate: 48000, Channels: 1, BitsPerSample: 24, Frames: 4},
		},
		{
			name:   "pcm32",
			file:   buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 1, 96000, 32, 4)}, chunk{id: "data", body: int32Bytes(0, 1<<30, math.MinInt32)}),
			want:   []float32{0, 0.5, -1},
			format: WAVFormat{Rate: 96000, Channels: 1, BitsPerSample: 32, Frames: 3},
		},
		{
			name:   "float32 with fact chunk and NaN/Inf sanitised",
			file:   buildRIFF("RIFF", -1, chunk{id: "fmt ", body: append(fmtBody(wavFormatFloat, 1, 44100, 32, 4), 0, 0)}, chunk{id: "fact", body: int32Bytes(5)}, chunk{id: "data", body: float32Bytes(0.25, -1.5, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)))}),
			want:   []float32{0.25, -1.5, 0, 1, -1},
			format: WAVFormat{Rate: 44100, Channels: 1, BitsPerSample: 32, Float: true, Frames: 5},
		},
		{
			name:   "float64 stereo",
			file:   buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatFloat, 2, 22050, 64, 16)}, chunk{id: "data", body: float64Bytes(0.125, -0.5, 1, -1)}),
			want:   []float32{0.125, -0.5, 1, -1},
			format: WAVFormat{Rate: 22050, Channels: 2, BitsPerSample: 64, Float: true, Frames: 2},
		},
		{
			name:   "extensible pcm 20 valid bits in 24",
			file:   buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtExtensible(wavFormatPCM, 1, 48000, 24, 20, 3, guid)}, chunk{id: "data", body: int24Bytes(1<<22, -(1 << 22))}),
			want:   []float32{0.5, -0.5},
			format: WAVFormat{Rate: 48000, Channels: 1, BitsPerSample: 20, Frames: 2},
		},
		{
			name:   "extensible float 3 channels",
			file:   buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtExtensible(wavFormatFloat, 3, 16000, 32, 32, 12, guid)}, chunk{id: "data", body: float32Bytes(0.1, 0.2, 0.3)}),
			want:   []float32{0.1, 0.2, 0.3},
			format: WAVFormat{Rate: 16000, Channels: 3, BitsPerSample: 32, Float: true, Frames: 1},
		},
		{
			name:   "12-bit samples in 16-bit containers",
			file:   buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 1, 8000, 12, 2)}, chunk{id: "data", body: pcm16(16384)}),
			want:   []float32{0.5},
			format: WAVFormat{Rate: 8000, Channels: 1, BitsPerSample: 12, Frames: 1},
		},
		{
			name: "unknown chunks before and between, odd sizes padded",
			file: buildRIFF("RIFF", -1,
				chunk{id: "JUNK", body: []byte{1, 2, 3}},
				fmtMono16k16,
				chunk{id: "LIST", body: []byte("INFOISFT\x05\x00\x00\x00Lavf\x00")},
				chunk{id: "bext", body: make([]byte, 7)},
				chunk{id: "data", body: pcm16(100, -100)}),
			want:   []float32{100.0 / 32768, -100.0 / 32768},
			format: WAVFormat{Rate: 16000, Channels: 1, BitsPerSample: 16, Frames: 2},
		},
		{
			name: "odd chunk whose writer forgot the pad byte",
			file: buildRIFF("RIFF", -1,
				fmtMono16k16,
				chunk{id: "note", body: []byte{9, 9, 9}, noPad: true},
				chunk{id: "data", body: pcm16(7)}),
			want:   []float32{7.0 / 32768},
			format: WAVFormat{Rate: 16000, Channels: 1, BitsPerSample: 16, Frames: 1},
		},
		{
			name:   "chunk after the data is not audio",
			file:   buildRIFF("RIFF", -1, fmtMono16k16, chunk{id: "data", body: pcm16(1, 2)}, chunk{id: "LIST", body: []byte("INFOabcd")}),
			want:   []float32{1.0 / 32768, 2.0 / 32768},
			format: WAVFormat{Rate: 16000, Channels: 1, BitsPerSample: 16, Frames: 2},
		},
		{
			name:   "streamed: RIFF and data sizes 0",
			file:   buildRIFF("RIFF", 0, fmtMono16k16, chunk{id: "data", body: pcm16(1, 2, 3), size: u32(0)}),
			want:   []float32{1.0 / 32768, 2.0 / 32768, 3.0 / 32768},
			format: WAVFormat{Rate: 16000, Channels: 1, BitsPerSample: 16, Frames: -1},
		},
		{
			name:   "streamed: sizes 0xFFFFFFFF",
			file:   buildRIFF("RIFF", 0xFFFFFFFF, fmtMono16k16, chunk{id: "data", body: pcm16(4, 5), size: u32(0xFFFFFFFF)}),
			want:   []float32{4.0 / 32768, 5.0 / 32768},
			format: WAVFormat{Rate: 16000, Channels: 1, BitsPerSample: 16, Frames: -1},
		},
		{
			name: "RF64 with ds64 sizes",
			file: buildRIFF("RF64", 0xFFFFFFFF,
				chunk{id: "ds64", body: append(append(binary.LittleEndian.AppendUint64(nil, 100), binary.LittleEndian.AppendUint64(nil, 4)...), make([]byte, 12)...)},
				fmtMono16k16,
				chunk{id: "data", body: pcm16(8, 9, 10), size: u32(0xFFFFFFFF)}),
			want:   []float32{8.0 / 32768, 9.0 / 32768},
			format: WAVFormat{Rate: 16000, Channels: 1, BitsPerSample: 16, Frames: 2},
		},
		{
			name:   "declared data size not whole frames: partial frame dropped",
			file:   buildRIFF("RIFF", -1, fmtMono16k16, chunk{id: "data", body: append(pcm16(1, 2), 0x7f)}),
			want:   []float32{1.0 / 32768, 2.0 / 32768},
			format: WAVFormat{Rate: 16000, Channels: 1, BitsPerSample: 16, Frames: 2},
		},
		{
			name:    "data size beyond the end: truncated, data kept",
			file:    buildRIFF("RIFF", -1, fmtMono16k16, chunk{id: "data", body: pcm16(1, 2, 3), size: u32(1000)}),
			want:    []float32{1.0 / 32768, 2.0 / 32768, 3.0 / 32768},
			format:  WAVFormat{Rate: 16000, Channels: 1, BitsPerSample: 16, Frames: 500},
			wantErr: ErrTruncated,
		},
		{
			name:    "streamed and cut inside a frame",
			file:    buildRIFF("RIFF", 0, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 2, 16000, 16, 4)}, chunk{id: "data", body: append(pcm16(1, 2), 5, 0), size: u32(0)}),
			want:    []float32{1.0 / 32768, 2.0 / 32768},
			format:  WAVFormat{Rate: 16000, Channels: 2, BitsPerSample: 16, Frames: -1},
			wantErr: ErrTruncated,
		},
		{name: "empty input", file: nil, wantErr: ErrNotWAV},
		{name: "not RIFF", file: []byte("OggS\x00\x02\x00\x00\x00\x00\x00\x00"), wantErr: ErrNotWAV},
		{name: "RIFF but AVI", file: buildRIFF("RIFF", -1, chunk{id: "avih", body: make([]byte, 4)})[:8:8], wantErr: ErrTruncated},
		{name: "RIFF AVI form", file: append([]byte("RIFF\x04\x00\x00\x00AVI "), 0), wantErr: ErrNotWAV},
		{name: "big-endian RIFX", file: []byte("RIFX\x00\x00\x00\x00WAVE"), wantErr: ErrUnsupportedFormat},
		{name: "only 6 bytes", file: []byte("RIFF\x10\x00"), wantErr: ErrTruncated},
		{name: "no fmt before data", file: buildRIFF("RIFF", -1, chunk{id: "data", body: pcm16(1)}), wantErr: ErrCorrupt},
		{name: "no data chunk", file: buildRIFF("RIFF", -1, fmtMono16k16), wantErr: ErrEmptyAudio},
		{name: "no chunks at all", file: buildRIFF("RIFF", -1), wantErr: ErrEmptyAudio},
		{name: "header cut in the chunk list", file: buildRIFF("RIFF", 1000, fmtMono16k16), wantErr: ErrTruncated},
		{name: "fmt chunk cut short", file: buildRIFF("RIFF", -1, fmtMono16k16)[:30], wantErr: ErrTruncated},
		{name: "zero-length data", file: buildRIFF("RIFF", -1, fmtMono16k16, chunk{id: "data"}), wantErr: ErrEmptyAudio},
		{name: "streamed, no samples", file: buildRIFF("RIFF", 0xFFFFFFFF, fmtMono16k16, chunk{id: "data", size: u32(0xFFFFFFFF)}), wantErr: ErrEmptyAudio},
		{name: "fmt too short", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: make([]byte, 14)}, chunk{id: "data", body: pcm16(1)}), wantErr: ErrCorrupt},
		{name: "two fmt chunks", file: buildRIFF("RIFF", -1, fmtMono16k16, fmtMono16k16, chunk{id: "data", body: pcm16(1)}), wantErr: ErrCorrupt},
		{name: "zero channels", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 0, 16000, 16, 2)}, chunk{id: "data", body: pcm16(1)}), wantErr: ErrCorrupt},
		{name: "zero rate", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 1, 0, 16, 2)}, chunk{id: "data", body: pcm16(1)}), wantErr: ErrUnsupportedFormat},
		{name: "too many channels", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 5000, 16000, 16, 10000)}, chunk{id: "data", body: pcm16(1)}), wantErr: ErrUnsupportedFormat},
		{name: "block align contradicts", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 2, 16000, 16, 3)}, chunk{id: "data", body: pcm16(1)}), wantErr: ErrCorrupt},
		{name: "zero bits", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 1, 16000, 0, 2)}, chunk{id: "data", body: pcm16(1)}), wantErr: ErrCorrupt},
		{name: "48-bit integers", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 1, 16000, 48, 6)}, chunk{id: "data", body: make([]byte, 6)}), wantErr: ErrUnsupportedFormat},
		{name: "16-bit float", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatFloat, 1, 16000, 16, 2)}, chunk{id: "data", body: pcm16(1)}), wantErr: ErrUnsupportedFormat},
		{name: "ADPCM", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(0x0002, 1, 16000, 4, 256)}, chunk{id: "data", body: make([]byte, 256)}), wantErr: ErrUnsupportedFormat},
		{name: "mu-law", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatMuLaw, 1, 8000, 8, 1)}, chunk{id: "data", body: []byte{1}}), wantErr: ErrUnsupportedFormat},
		{name: "extensible with foreign GUID", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtExtensible(wavFormatPCM, 1, 16000, 16, 16, 2, badGUID)}, chunk{id: "data", body: pcm16(1)}), wantErr: ErrUnsupportedFormat},
		{name: "extensible too short", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatExtensible, 1, 16000, 16, 2)}, chunk{id: "data", body: pcm16(1)}), wantErr: ErrCorrupt},
		{name: "extensible valid bits above container", file: buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtExtensible(wavFormatPCM, 1, 16000, 16, 24, 2, guid)}, chunk{id: "data", body: pcm16(1)}), wantErr: ErrCorrupt},
		{name: "chunk size runs past the end", file: buildRIFF("RIFF", -1, fmtMono16k16, chunk{id: "LIST", body: []byte("INFO"), size: u32(1 << 30)}), wantErr: ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := DecodeWAV(bytes.NewReader(tc.file))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.want != nil {
				if f.Rate != tc.format.Rate || f.Channels != tc.format.Channels || f.Start != 0 {
					t.Errorf("frame is %d Hz x%d @%d, want %d Hz x%d @0", f.Rate, f.Channels, f.Start, tc.format.Rate, tc.format.Channels)
				}
				assertSamples(t, f.Samples, tc.want, 1e-7)
			}
			if tc.format.Rate == 0 {
				return
			}
			r, err := NewWAVReader(bytes.NewReader(tc.file))
			if err != nil {
				t.Fatalf("NewWAVReader: %v", err)
			}
			if got := r.Format(); got != tc.format {
				t.Errorf("format = %+v, want %+v", got, tc.format)
			}
		})
	}
}

func assertSamples(t *testing.T, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d samples, want %d: %v vs %v", len(got), len(want), head(got), head(want))
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > tol {
			t.Fatalf("sample %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func head(s []float32) []float32 { return s[:min(len(s), 8)] }

// TestWAVReaderChunking checks that reading with any buffer size and from a source that
// hands out one byte at a time gives exactly what a whole-file decode gives.
func TestWAVReaderChunking(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := Frame{Rate: 44100, Channels: 3, Samples: make([]float32, 3*1001)}
	for i := range src.Samples {
		src.Samples[i] = float32(rng.Float64()*2 - 1)
	}
	for _, bits := range []int{8, 16, 24, 32, 64} {
		var buf bytes.Buffer
		if err := EncodeWAV(&buf, src, bits); err != nil {
			t.Fatal(err)
		}
		whole, err := DecodeWAV(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%d bits: %v", bits, err)
		}
		for _, size := range []int{3, 6, 9, 30, 3 * 1000, 3 * 5000} {
			for _, oneByte := range []bool{false, true} {
				var in io.Reader = bytes.NewReader(buf.Bytes())
				if oneByte {
					in = iotest.OneByteReader(in)
				}
				r, err := NewWAVReader(in)
				if err != nil {
					t.Fatal(err)
				}
				var got []float32
				dst := make([]float32, size)
				for {
					n, err := r.Read(dst)
					if n%3 != 0 {
						t.Fatalf("Read returned %d samples, not whole frames", n)
					}
					got = append(got, dst[:n]...)
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
				}
				assertSamples(t, got, whole.Samples, 0)
				if n, err := r.Read(dst); n != 0 || err != io.EOF {
					t.Fatalf("Read after EOF = %d, %v", n, err)
				}
			}
		}
	}
}

func TestWAVReaderShortBuffer(t *testing.T) {
	file := buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 2, 16000, 16, 4)}, chunk{id: "data", body: pcm16(1, 2)})
	r, err := NewWAVReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(make([]float32, 1)); n != 0 || !errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("Read(1 sample) of stereo = %d, %v; want io.ErrShortBuffer", n, err)
	}
	if n, err := r.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v", n, err)
	}
}

// TestWAVRoundTrip writes every encoding and channel count and reads it back.
func TestWAVRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bits := range []int{8, 16, 24, 32, 64} {
		for _, channels := range []int{1, 2, 3, 6} {
			for _, rate := range []int{8000, 16000, 44100, 48000} {
				frames := 257
				src := Frame{Rate: rate, Channels: channels, Samples: make([]float32, frames*channels)}
				for i := range src.Samples {
					src.Samples[i] = float32(rng.Float64()*2.4 - 1.2) // some beyond full scale
				}
				var buf bytes.Buffer
				if err := EncodeWAV(&buf, src, bits); err != nil {
					t.Fatalf("%d bits: %v", bits, err)
				}
				got, err := DecodeWAV(bytes.NewReader(buf.Bytes()))
				if err != nil {
					t.Fatalf("%d bits x%d @%d: %v", bits, channels, rate, err)
				}
				if got.Rate != rate || got.Channels != channels || got.Len() != frames {
					t.Fatalf("%d bits: got %s, want %d Hz x%d %d frames", bits, got.Summary(), rate, channels, frames)
				}
				step := 1.0
				if bits <= 24 {
					step = 1 / math.Exp2(float64(bits-1))
				}
				for i, want := range src.Samples {
					w := float64(want)
					if bits <= 24 {
						w = math.Max(-1, math.Min(1-step, w)) // integers clip
					}
					tol := step / 2 * 1.0001
					if bits > 24 {
						tol = 0
					}
					if math.Abs(float64(got.Samples[i])-w) > tol {
						t.Fatalf("%d bits x%d: sample %d = %v, want %v ± %v", bits, channels, i, got.Samples[i], w, tol)
					}
				}
				// A second trip through the same integer encoding is exact.
				var again bytes.Buffer
				if err := EncodeWAV(&again, got, bits); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(again.Bytes(), buf.Bytes()) {
					t.Fatalf("%d bits x%d: re-encoding the decoded audio changed the file", bits, channels)
				}
			}
		}
	}
}

func TestEncodeWAVRejects(t *testing.T) {
	tests := []struct {
		name string
		f    Frame
		bits int
	}{
		{"no channels", Frame{Rate: 16000, Samples: []float32{0}}, 16},
		{"partial frame", Frame{Rate: 16000, Channels: 2, Samples: []float32{0}}, 16},
		{"no rate", Frame{Channels: 1, Samples: []float32{0}}, 16},
		{"12 bits", Frame{Rate: 16000, Channels: 1, Samples: []float32{0}}, 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := EncodeWAV(io.Discard, tc.f, tc.bits); err == nil {
				t.Fatal("EncodeWAV accepted it")
			}
		})
	}
}

// --- the streaming writer -----------------------------------------------------------

// nonSeeker hides a writer's Seek method, like a pipe.
type nonSeeker struct{ w io.Writer }

func (n nonSeeker) Write(p []byte) (int, error) { return n.w.Write(p) }

func TestWAVWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var all []float32
	chunks := make([]Frame, 5)
	for i := range chunks {
		f := Frame{Rate: 48000, Channels: 2, Samples: make([]float32, 2*(100+37*i))}
		for j := range f.Samples {
			f.Samples[j] = float32(rng.Float64() - 0.5)
		}
		chunks[i] = f
		all = append(all, f.Samples...)
	}
	for _, bits := range []int{16, 24, 32} {
		t.Run("file", func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rec.wav")
			w, err := CreateWAVFile(path, 48000, 2, bits)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range chunks {
				if err := w.Write(f); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(chunks[0]); err == nil {
				t.Fatal("Write after Close succeeded")
			}
			format, err := StatWAVFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if format.Frames != int64(len(all)/2) {
				t.Fatalf("header says %d frames, wrote %d", format.Frames, len(all)/2)
			}
			got, err := DecodeWAVFile(path)
			if err != nil {
				t.Fatal(err)
			}
			tol := 1 / math.Exp2(float64(bits-1))
			if bits == 32 {
				tol = 0
			}
			assertSamples(t, got.Samples, all, tol)
		})
		t.Run("pipe", func(t *testing.T) {
			var buf bytes.Buffer
			w, err := NewWAVWriter(nonSeeker{&buf}, 48000, 2, bits)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range chunks {
				if err := w.Write(f); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := NewWAVReader(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if r.Format().Frames != -1 {
				t.Fatalf("a piped file should declare an unknown length, got %d frames", r.Format().Frames)
			}
			got, err := DecodeWAV(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if got.Len() != len(all)/2 {
				t.Fatalf("decoded %d frames, wrote %d", got.Len(), len(all)/2)
			}
		})
	}
	t.Run("channel mismatch", func(t *testing.T) {
		w, err := NewWAVWriter(io.Discard, 16000, 1, 16)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(Frame{Rate: 16000, Channels: 2, Samples: []float32{0, 0}}); err == nil {
			t.Fatal("accepted a stereo frame into a mono file")
		}
		if err := w.Write(Frame{Rate: 48000, Channels: 1, Samples: []float32{0}}); err == nil {
			t.Fatal("accepted a 48 kHz frame into a 16 kHz file")
		}
		if err := w.WriteSamples([]float32{0.5}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("header at an offset in a file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "offset.bin")
		fh, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		prefix := []byte("container prefix")
		fh.Write(prefix)
		w, err := NewWAVWriter(fh, 16000, 1, 16)
		if err != nil {
			t.Fatal(err)
		}
		w.WriteSamples([]float32{0.5, -0.5, 0.25})
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		r, err := NewWAVReader(bytes.NewReader(b[len(prefix):]))
		if err != nil {
			t.Fatal(err)
		}
		if r.Format().Frames != 3 {
			t.Fatalf("frames = %d, want 3", r.Format().Frames)
		}
	})
}

// TestWAVWriterCrashRecovery reads a recording whose writer never got to Close: the
// header still says "unknown length", so everything flushed is readable.
func TestWAVWriterCrashRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.wav")
	w, err := CreateWAVFile(path, 16000, 1, 16)
	if err != nil {
		t.Fatal(err)
	}
	samples := make([]float32, 50000) // more than the write buffer, so some reaches the file
	for i := range samples {
		samples[i] = float32(i%100) / 100
	}
	if err := w.WriteSamples(samples); err != nil {
		t.Fatal(err)
	}
	// No Close: simulate the process dying.
	got, err := DecodeWAVFile(path)
	if err != nil {
		t.Fatalf("decoding an unfinished recording: %v", err)
	}
	if got.Len() == 0 || got.Len() > len(samples) {
		t.Fatalf("recovered %d frames of %d", got.Len(), len(samples))
	}
	assertSamples(t, got.Samples, samples[:got.Len()], 1.0/32768)
	w.Close()
}

func TestWriteWAVFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.wav")
	f := Frame{Rate: 16000, Channels: 1, Samples: []float32{0, 0.5, -0.5}}
	if err := WriteWAVFile(path, f, 16); err != nil {
		t.Fatal(err)
	}
	if err := WriteWAVFile(path, Frame{Rate: 16000, Channels: 1, Samples: []float32{0.25}}, 32); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeWAVFile(path)
	if err != nil {
		t.Fatal(err)
	}
	assertSamples(t, got.Samples, []float32{0.25}, 0)
	// A failed write leaves the old file and no temporary behind.
	if err := WriteWAVFile(path, Frame{Rate: 16000, Channels: 2, Samples: []float32{0}}, 16); err == nil {
		t.Fatal("WriteWAVFile accepted a broken frame")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("directory holds %v, want only out.wav", names)
	}
	if got, err := DecodeWAVFile(path); err != nil || len(got.Samples) != 1 {
		t.Fatalf("old file damaged by a failed write: %v", err)
	}
	if err := WriteWAVFile(filepath.Join(dir, "missing", "x.wav"), f, 16); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
}

// TestWAVWritersLeaveDevicesAndFIFOs: WriteWAVFile and CreateWAVFile refuse a device, a
// FIFO and a symbolic link, and leave them as they were (a rename over /dev/null would
// have replaced the device with a WAV file).
func TestWAVWritersLeaveDevicesAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.wav")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "kept.wav")
	if err := os.WriteFile(target, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.wav")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	f := Frame{Rate: 16000, Channels: 1, Samples: []float32{0, 0.5}}
	for _, path := range []string{os.DevNull, "/dev/full", fifo, link} {
		before, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		werr := WriteWAVFile(path, f, 16)
		w, cerr := CreateWAVFile(path, 16000, 1, 16)
		if cerr == nil {
			w.Close()
		}
		for _, err := range []error{werr, cerr} {
			if !errors.Is(err, regularfile.ErrNotRegular) {
				t.Errorf("%s: %v, want a refusal", path, err)
			}
		}
		after, err := os.Lstat(path)
		if err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
			t.Errorf("%s changed: %v → %v (%v)", path, before.Mode(), after.Mode(), err)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "kept" {
		t.Errorf("the link's target holds %q", b)
	}
}

func TestStatWAVFile(t *testing.T) {
	dir := t.TempDir()
	good := buildRIFF("RIFF", -1, fmtMono16k16, chunk{id: "data", body: pcm16(1, 2, 3, 4)})
	tests := []struct {
		name    string
		data    []byte
		frames  int64
		wantErr error
	}{
		{"complete", good, 4, nil},
		{"cut short", good[:len(good)-3], 4, ErrTruncated},
		{"streamed", buildRIFF("RIFF", 0, fmtMono16k16, chunk{id: "data", body: pcm16(1), size: u32(0)}), -1, nil},
		{"streamed but empty", buildRIFF("RIFF", 0, fmtMono16k16, chunk{id: "data", size: u32(0)}), -1, ErrEmptyAudio},
		{"not a WAV", []byte("hello world, this is text"), 0, ErrNotWAV},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".wav")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			format, err := StatWAVFile(path)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if err == nil && format.Frames != tc.frames {
				t.Fatalf("frames = %d, want %d", format.Frames, tc.frames)
			}
			if err != nil && !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
	if _, err := StatWAVFile(filepath.Join(dir, "nope.wav")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// --- the shared recordings -----------------------------------------------------------

func sharedWAVs(t testing.TB) []string {
	t.Helper()
	dir := filepath.Join(testenv.SharedDir(t), "audio")
	paths, err := filepath.Glob(filepath.Join(dir, "*.wav"))
	if err != nil || len(paths) == 0 {
		testenv.Missing(t, "WAV files in "+dir, "the shared/ folder beside the project should contain them")
	}
	return paths
}

// TestDecodeSharedRecordings decodes every shared recording and checks the result
// against the header read independently here.
func TestDecodeSharedRecordings(t *testing.T) {
	for _, path := range sharedWAVs(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f, err := DecodeWAVFile(path)
			if err != nil {
				t.Fatal(err)
			}
			le := binary.LittleEndian
			wantChannels := int(le.Uint16(raw[22:24]))
			wantRate := int(le.Uint32(raw[24:28]))
			if f.Rate != wantRate || f.Channels != wantChannels {
				t.Fatalf("decoded %d Hz x%d, header says %d Hz x%d", f.Rate, f.Channels, wantRate, wantChannels)
			}
			// Find the data chunk the simple way and compare the samples.
			i := bytes.Index(raw, []byte("data"))
			size := int(le.Uint32(raw[i+4:]))
			data := raw[i+8 : i+8+size]
			if f.Len() != size/(2*wantChannels) {
				t.Fatalf("decoded %d frames, data chunk holds %d", f.Len(), size/(2*wantChannels))
			}
			for k := 0; k < len(f.Samples); k += 997 {
				want := float32(int16(le.Uint16(data[2*k:]))) / 32768
				if f.Samples[k] != want {
					t.Fatalf("sample %d = %v, want %v", k, f.Samples[k], want)
				}
			}
			st, err := StatWAVFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Frames != int64(f.Len()) || st.BitsPerSample != 16 || st.Float {
				t.Fatalf("StatWAVFile = %+v", st)
			}
			rms := RMS(f.Samples)
			if rms < 1e-3 {
				t.Fatalf("RMS %.5f: decoded audio looks silent", rms)
			}
		})
	}
}

// --- fuzzing ---------------------------------------------------------------------------

// FuzzDecodeWAV feeds arbitrary bytes to the decoder: it must never panic, never hand
// out non-finite samples, and the streaming reader must agree with the whole-file decode.
func FuzzDecodeWAV(f *testing.F) {
	guid := extensibleGUIDTail[:]
	seeds := [][]byte{
		buildRIFF("RIFF", -1, fmtMono16k16, chunk{id: "data", body: pcm16(1, -2, 3)}),
		buildRIFF("RIFF", 0, fmtMono16k16, chunk{id: "data", body: pcm16(1, 2), size: u32(0)}),
		buildRIFF("RIFF", 0xFFFFFFFF, fmtMono16k16, chunk{id: "data", body: pcm16(1, 2, 3), size: u32(0xFFFFFFFF)}),
		buildRIFF("RIFF", -1, fmtMono16k16, chunk{id: "data", body: pcm16(1), size: u32(1 << 31)}),
		buildRIFF("RIFF", -1, chunk{id: "LIST", body: []byte("INFOa")}, fmtMono16k16, chunk{id: "data", body: pcm16(5)}),
		buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 2, 44100, 24, 6)}, chunk{id: "data", body: int24Bytes(1, 2, 3, 4)}),
		buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatFloat, 1, 48000, 32, 4)}, chunk{id: "data", body: float32Bytes(0.5, float32(math.NaN()))}),
		buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatFloat, 1, 48000, 64, 8)}, chunk{id: "data", body: float64Bytes(1e300)}),
		buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtExtensible(wavFormatPCM, 4, 16000, 32, 24, 16, guid)}, chunk{id: "data", body: make([]byte, 32)}),
		buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 1, 8000, 8, 1)}, chunk{id: "data", body: []byte{1, 2, 3}}),
		buildRIFF("RF64", 0xFFFFFFFF, chunk{id: "ds64", body: make([]byte, 28)}, fmtMono16k16, chunk{id: "data", body: pcm16(1), size: u32(0xFFFFFFFF)}),
		buildRIFF("RIFF", -1, chunk{id: "fmt ", body: fmtBody(wavFormatPCM, 1024, 16000, 64, 8192)}, chunk{id: "data", body: make([]byte, 8)}),
		buildRIFF("RIFF", -1, fmtMono16k16, chunk{id: "odd!", body: []byte{1}, noPad: true}, chunk{id: "data", body: pcm16(1)}),
		[]byte("RIFF"),
		[]byte("RIFF\xff\xff\xff\xffWAVEfmt \x10\x00\x00\x00"),
		{},
	}
	for _, s := range seeds {
		f.Add(s)
	}
	// The shared recordings' headers (and a little audio) as seeds, when they are here;
	// the fuzz test itself does not need them.
	if dir := sharedDirQuiet(); dir != "" {
		paths, _ := filepath.Glob(filepath.Join(dir, "audio", "*.wav"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b[:min(len(b), 200)])
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		whole, err := DecodeWAV(bytes.NewReader(data))
		if err != nil && !isKnownWAVError(err) {
			t.Fatalf("error %v wraps none of the package's sentinel errors", err)
		}
		if err == nil || len(whole.Samples) > 0 {
			if whole.Channels < 1 || whole.Rate < 1 || len(whole.Samples)%whole.Channels != 0 {
				t.Fatalf("bad frame %s with %d samples", whole.Summary(), len(whole.Samples))
			}
		}
		for i, s := range whole.Samples {
			if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
				t.Fatalf("sample %d is %v", i, s)
			}
		}
		// Streaming with a small buffer, one byte at a time, gives the same samples.
		r, rerr := NewWAVReader(iotest.OneByteReader(bytes.NewReader(data)))
		if rerr != nil {
			if err == nil {
				t.Fatalf("DecodeWAV succeeded but NewWAVReader failed: %v", rerr)
			}
			return
		}
		dst := make([]float32, r.Format().Channels*7)
		var got []float32
		for {
			n, err := r.Read(dst)
			got = append(got, dst[:n]...)
			if err != nil {
				break
			}
		}
		if len(got) != len(whole.Samples) {
			t.Fatalf("streaming read gave %d samples, whole decode %d", len(got), len(whole.Samples))
		}
		if err == nil {
			// What decodes re-encodes as float and decodes to the same samples.
			var buf bytes.Buffer
			if err := EncodeWAV(&buf, whole, 32); err != nil {
				t.Fatal(err)
			}
			again, err := DecodeWAV(&buf)
			if err != nil {
				t.Fatal(err)
			}
			assertSamples(t, again.Samples, whole.Samples, 0)
		}
	})
}

func isKnownWAVError(err error) bool {
	for _, e := range []error{ErrNotWAV, ErrCorrupt, ErrUnsupportedFormat, ErrTruncated, ErrEmptyAudio} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// sharedDirQuiet finds the shared folder without skipping (for optional fuzz seeds).
func sharedDirQuiet() string {
	if d := os.Getenv("PARLEY_SHARED"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	d := filepath.Join(wd, "..", "..", "shared")
	if st, err := os.Stat(d); err == nil && st.IsDir() {
		return d
	}
	return ""
}
