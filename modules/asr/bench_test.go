package asr

import (
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
)

// benchAudio returns a shared recording at 16 kHz mono.
func benchAudio(b *testing.B, name string) []float32 {
	f, err := audio.DecodeWAVFile(testenv.SharedFile(b, "audio/"+name))
	if err != nil {
		b.Fatal(err)
	}
	if f, err = audio.ToPipeline(f); err != nil {
		b.Fatal(err)
	}
	return f.Samples
}

// benchStreaming decodes samples as one utterance the way the ASR module drives an
// engine (20 ms pieces, a partial hypothesis every hop, the final decode) and reports
// the real-time factor: processing time per second of audio.
func benchStreaming(b *testing.B, e Engine, samples []float32, hop int) {
	b.ResetTimer()
	for b.Loop() {
		streamDecode(b, e, samples, hop)
	}
	audioSec := float64(len(samples)) / audio.PipelineRate * float64(b.N)
	b.ReportMetric(b.Elapsed().Seconds()/audioSec, "rtf")
}

func BenchmarkPocketsphinxStreaming(b *testing.B) {
	needPocketsphinx(b)
	for _, final := range []bool{true, false} {
		name := "final-pass"
		if !final {
			name = "streaming-only"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultPocketsphinxConfig()
			cfg.FinalPass = final
			e, err := NewPocketsphinxEngine(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			benchStreaming(b, e, benchAudio(b, "jfk.wav"), int(audio.DurationToSamples(DefaultConfig().Hop, audio.PipelineRate)))
		})
	}
}

// BenchmarkWhisperStreaming re-decodes a growing utterance (goforward.wav, 2.8 s) every
// hop with whisper.cpp's weightless tiny.en test model, whose compute matches a real
// tiny model's encoder (a real model also spends time decoding tokens).
func BenchmarkWhisperStreaming(b *testing.B) {
	for _, hop := range []string{"300ms", "1s"} {
		b.Run("hop-"+hop, func(b *testing.B) {
			e, err := NewWhisperEngine(whisperConfig(b))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			n := 300 * audio.PipelineRate / 1000
			if hop == "1s" {
				n = audio.PipelineRate
			}
			benchStreaming(b, e, benchAudio(b, "goforward.wav"), n)
		})
	}
}
