package whisper

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/internal/testenv"
)

func loadBackends(t testing.TB) {
	t.Helper()
	SetLogger(LogNone, nil) // also ggml's, which announces the backends it loads
	if err := ggml.LoadBackends(); err != nil {
		testenv.Missing(t, "a ggml CPU backend", testenv.EnvFix)
	}
}

func openVAD(t testing.TB) *VAD {
	t.Helper()
	loadBackends(t)
	v, err := NewVAD(testenv.SharedFile(t, "models/ggml-silero-v6.2.0.bin"), VADParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

// speechFiles returns the shared recordings that are 16 kHz mono already.
func speechFiles(t testing.TB) map[string][]float32 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(testenv.SharedDir(t), "audio", "*.wav"))
	if err != nil || len(paths) == 0 {
		testenv.Missing(t, "shared recordings", "the shared/audio folder should hold WAV files")
	}
	out := map[string][]float32{}
	for _, p := range paths {
		f, err := audio.DecodeWAVFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if f.Rate == SampleRate && f.Channels == 1 {
			out[filepath.Base(p)] = f.Samples
		}
	}
	return out
}

// TestVADStreamingMatchesWhole checks that feeding audio in pieces of any size gives
// exactly the probabilities of libwhisper's whole-buffer detection: the LSTM state
// carries over between calls and incomplete windows wait for their samples.
func TestVADStreamingMatchesWhole(t *testing.T) {
	v := openVAD(t)
	for name, samples := range speechFiles(t) {
		whole, err := v.WholeProbs(samples)
		if err != nil {
			t.Fatal(err)
		}
		for _, chunk := range []int{1, 100, 320, 512, 1000, 4096} {
			v.Reset()
			var got []float32
			for i := 0; i < len(samples); i += chunk {
				p, err := v.Probs(samples[i:min(i+chunk, len(samples))])
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, p...)
				if v.Pending() >= VADWindow {
					t.Fatalf("%d samples pending after a call", v.Pending())
				}
			}
			p, err := v.Flush()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p...)
			if len(got) != len(whole) {
				t.Fatalf("%s chunk %d: %d probabilities, whole-buffer detection gives %d", name, chunk, len(got), len(whole))
			}
			for i := range got {
				if math.Abs(float64(got[i]-whole[i])) > 1e-6 {
					t.Fatalf("%s chunk %d: window %d: %g, whole-buffer %g", name, chunk, i, got[i], whole[i])
				}
			}
			if chunk == 1 && testing.Short() {
				break
			}
		}
	}
}

func TestVADReset(t *testing.T) {
	v := openVAD(t)
	samples := speechFiles(t)["jfk.wav"]
	if samples == nil {
		testenv.Missing(t, "jfk.wav", "the shared/audio folder should hold it")
	}
	first, _ := v.Probs(samples[:16000])
	v.Probs(samples[16000:48000])
	v.Probs(samples[:100]) // leaves an incomplete window
	v.Reset()
	if v.Pending() != 0 {
		t.Fatalf("%d samples pending after Reset", v.Pending())
	}
	again, _ := v.Probs(samples[:16000])
	for i := range first {
		if first[i] != again[i] {
			t.Fatalf("window %d after Reset: %g, fresh %g", i, again[i], first[i])
		}
	}
}

func TestVADSpeechSegmentsJFK(t *testing.T) {
	v := openVAD(t)
	samples := speechFiles(t)["jfk.wav"]
	if samples == nil {
		testenv.Missing(t, "jfk.wav", "the shared/audio folder should hold it")
	}
	got, err := v.SpeechSegments(samples, DefaultSegmentParams())
	if err != nil {
		t.Fatal(err)
	}
	want := []Span{{0.32, 2.27}, {3.27, 4.41}, {5.38, 7.68}, {8.16, 10.62}}
	if len(got) != len(want) {
		t.Fatalf("segments %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i].Start-want[i].Start) > 0.011 || math.Abs(got[i].End-want[i].End) > 0.011 {
			t.Fatalf("segments %v, want %v", got, want)
		}
	}
}

func TestDefaultSegmentParams(t *testing.T) {
	want := SegmentParams{Threshold: 0.5, MinSpeechMS: 250, MinSilenceMS: 100, SpeechPadMS: 30}
	if got := DefaultSegmentParams(); got != want {
		t.Fatalf("libwhisper's defaults %+v, expected %+v", got, want)
	}
}

func TestVADErrors(t *testing.T) {
	loadBackends(t)
	if _, err := NewVAD(filepath.Join(t.TempDir(), "missing.bin"), VADParams{}); err == nil {
		t.Fatal("NewVAD of a missing file succeeded")
	}
	junk := filepath.Join(t.TempDir(), "junk.bin")
	if err := os.WriteFile(junk, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewVAD(junk, VADParams{}); err == nil {
		t.Fatal("NewVAD of a junk file succeeded")
	}
	v := openVAD(t)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := v.Probs(make([]float32, 1024)); err == nil {
		t.Fatal("Probs after Close succeeded")
	}
}
