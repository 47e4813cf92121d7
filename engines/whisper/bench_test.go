package whisper

import (
	"context"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
)

// reportRTF reports the real-time factor: processing time per second of audio.
func reportRTF(b *testing.B, samplesPerOp int) {
	audioSec := float64(samplesPerOp) / SampleRate * float64(b.N)
	b.ReportMetric(b.Elapsed().Seconds()/audioSec, "rtf")
}

func jfk(b *testing.B) []float32 {
	s := speechFiles(b)["jfk.wav"]
	if s == nil {
		testenv.Missing(b, "jfk.wav", "the shared/audio folder should hold it")
	}
	return s
}

// BenchmarkVAD streams jfk.wav through Silero VAD in 20 ms pieces, as the VAD module
// does.
func BenchmarkVAD(b *testing.B) {
	v := openVAD(b)
	s := jfk(b)
	b.ResetTimer()
	for b.Loop() {
		v.Reset()
		for i := 0; i < len(s); i += 320 {
			if _, err := v.Probs(s[i:min(i+320, len(s))]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := v.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	reportRTF(b, len(s))
}

// BenchmarkWhisperDecode decodes the first 3 s of jfk.wav with whisper.cpp's weightless
// tiny.en test model: the compute of a real tiny model (same shapes), though a real model
// would also decode tokens. Full: whisper's fixed 30 s encoder window; short: the window
// cut to the audio, as partial decodes do.
func BenchmarkWhisperDecode(b *testing.B) {
	m := openTestModel(b)
	d, err := m.NewDecoder()
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	s := jfk(b)[:3*SampleRate]
	for _, tc := range []struct {
		name string
		p    DecodeParams
	}{
		{"full", DecodeParams{Threads: 2, NoFallback: true, SingleSegment: true, TokenTimestamps: true}},
		{"short", DecodeParams{Threads: 2, NoFallback: true, SingleSegment: true, TokenTimestamps: true, AudioContext: AudioContextFor(len(s))}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := d.Decode(context.Background(), s, tc.p); err != nil {
					b.Fatal(err)
				}
			}
			reportRTF(b, len(s))
			b.ReportMetric(float64(b.Elapsed()/time.Millisecond)/float64(b.N), "ms/decode")
		})
	}
}
