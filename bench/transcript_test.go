package bench

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/shapemodels"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/asr/whispercpp"
)

// TestTranscriptOnWhisperShape runs Transcript on a model of whisper tiny.en's shape
// (built into the cache the first time): each decode answers with the words that lie
// (by most of their length) in the audio decoded, timed from its start, and runs the
// model's decode; a quick final follows the engine.
func TestTranscriptOnWhisperShape(t *testing.T) {
	ctx := context.Background()
	path, err := shapemodels.Ensure(ctx, shapemodels.WhisperTinyEn)
	if err != nil {
		t.Fatal(err)
	}
	cfg := asr.DefaultWhisperConfig()
	cfg.Model, cfg.Threads = path, 1
	e, err := whispercpp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	words := []SpokenWord{{"so", 200 * time.Millisecond, 400 * time.Millisecond},
		{"what", 1140 * time.Millisecond, 1450 * time.Millisecond}, {"time", 1450 * time.Millisecond, 1800 * time.Millisecond}}
	tr := NewTranscript(e, words)
	defer tr.Close()
	if !tr.QuickFinals() {
		t.Error("a default whisper engine's finals are quick; the transcript's are not")
	}
	samples := func(d time.Duration) []float32 {
		return make([]float32, audio.DurationToSamples(d, audio.PipelineRate))
	}
	tr.StreamAt(audio.DurationToSamples(time.Second, audio.PipelineRate))
	if err := tr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tr.Feed(ctx, samples(600*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	h, err := tr.Partial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// "so" lies before the audio, most of "time" after it.
	want := []asr.HypWord{{Text: "what", Start: 140 * time.Millisecond, End: 450 * time.Millisecond, Confidence: 1}}
	if got := h.Words; !reflect.DeepEqual(got, want) {
		t.Errorf("partial of 1.0–1.6 s: %+v, want %+v", got, want)
	}
	h, err = tr.FinalOf(ctx, samples(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, asr.HypWord{Text: "time", Start: 450 * time.Millisecond, End: 800 * time.Millisecond, Confidence: 1})
	if got := h.Words; !reflect.DeepEqual(got, want) {
		t.Errorf("final of 1.0–2.0 s: %+v, want %+v", got, want)
	}
}
