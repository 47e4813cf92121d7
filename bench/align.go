package bench

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/modules/source"
)

// ScenarioWords returns the words a scenario's recordings say (their says: text), each
// where the replay's stream has it: the recording's place on the timeline plus where
// pocketsphinx's forced alignment of the words puts it in the recording, as the
// source plays it (16 kHz mono). A recording whose words the dictionary lacks ("hey
// mycroft") has its words spread over its sound (audio.SoundBounds) by their length.
// Only recordings placed at a fixed time (at:) can be aligned before the replay runs:
// one placed after the agent's speech or after another's speech is refused.
func ScenarioWords(sc *source.Scenario) ([]SpokenWord, error) {
	var out []SpokenWord
	var dec *pocketsphinx.Decoder
	defer func() {
		if dec != nil {
			dec.Close()
		}
	}()
	for _, rec := range sc.Recordings {
		if rec.Says == "" {
			continue
		}
		if rec.AfterAgent != nil || rec.AfterPrevious != nil {
			return nil, fmt.Errorf("recording %q (scenario line %d): only recordings placed by at: have known word times before the replay", rec.Name, rec.Line)
		}
		if rec.File == "" || rec.Made() {
			return nil, fmt.Errorf("recording %q (scenario line %d): no recording file to align its words with", rec.Name, rec.Line)
		}
		samples, err := pipelineAudio(rec.File)
		if err != nil {
			return nil, fmt.Errorf("recording %q: %w", rec.Name, err)
		}
		// A decoder per recording: an alignment adapts the cepstral mean as it goes,
		// and every recording should be aligned from the model's own.
		if dec != nil {
			dec.Close()
		}
		// FATAL: a word the dictionary lacks is expected (spreadWords places it), not
		// an error to print.
		if dec, err = pocketsphinx.NewDecoder(pocketsphinx.Config{LogLevel: "FATAL"}); err != nil {
			return nil, err
		}
		words, err := alignWords(dec, rec.Says, samples)
		if err != nil {
			return nil, fmt.Errorf("recording %q: %w", rec.Name, err)
		}
		for _, w := range words {
			out = append(out, SpokenWord{Text: w.Text, Start: rec.At + w.Start, End: rec.At + w.End})
		}
	}
	return out, nil
}

// pipelineAudio reads a WAV file as the source plays it: mixed down and resampled to the
// pipeline's rate.
func pipelineAudio(path string) ([]float32, error) {
	f, err := audio.DecodeWAVFile(path)
	if err != nil {
		return nil, err
	}
	f = audio.Downmix(f)
	rs, err := audio.NewResampler(f.Rate, audio.PipelineRate, 1, audio.QualityDefault)
	if err != nil {
		return nil, err
	}
	out := append([]float32(nil), rs.Process(f.Samples)...)
	return append(out, rs.Flush()...), nil
}

// alignWords places the words of says in samples: by forced alignment, or, when the
// dictionary lacks a word, spread over the sound by their length (spreadWords).
func alignWords(dec *pocketsphinx.Decoder, says string, samples []float32) ([]SpokenWord, error) {
	words := dictionaryWords(says)
	if len(words) == 0 {
		return nil, nil
	}
	if err := dec.SetAlignText(strings.Join(words, " ")); err == nil {
		if got, err := align(dec, samples); err == nil && len(got) == len(words) {
			return got, nil
		}
	}
	start, end := audio.SoundBounds(samples, audio.PipelineRate)
	if end <= start {
		return nil, errors.New("no sound to place its words in")
	}
	return spreadWords(words, audio.SamplesToDuration(int64(start), audio.PipelineRate), audio.SamplesToDuration(int64(end), audio.PipelineRate)), nil
}

// align decodes samples with the alignment the decoder was set to and returns its words.
func align(dec *pocketsphinx.Decoder, samples []float32) ([]SpokenWord, error) {
	if err := dec.StartUtt(); err != nil {
		return nil, err
	}
	if err := dec.Process(pocketsphinx.FloatToPCM16(nil, samples), true); err != nil {
		return nil, err
	}
	if err := dec.EndUtt(); err != nil {
		return nil, err
	}
	var out []SpokenWord
	for _, w := range dec.Words() {
		if !w.Filler {
			out = append(out, SpokenWord{Text: w.Text, Start: w.Start, End: w.End})
		}
	}
	return out, nil
}

// spreadWords places words one after the other from start to end, each with a share of
// the time proportional to its letters (plus one, for the gap after it).
func spreadWords(words []string, start, end time.Duration) []SpokenWord {
	total := 0
	for _, w := range words {
		total += len(w) + 1
	}
	out := make([]SpokenWord, len(words))
	at, done := start, 0
	for i, w := range words {
		done += len(w) + 1
		next := start + (end-start)*time.Duration(done)/time.Duration(total)
		out[i] = SpokenWord{Text: w, Start: at, End: next}
		at = next
	}
	return out
}

// dictionaryWords splits text into the lower-case words a pronunciation dictionary
// lists: without punctuation, apostrophes kept ("don't").
func dictionaryWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\''
	})
}
