package voices

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strings"
)

// Word is a word of a spoken sentence where forced alignment found it.
type Word struct {
	// Text is the word, lower-case, without punctuation (Words).
	Text string `json:"text"`
	// Start and End are its first sample and the sample after its last, at Rate.
	Start int `json:"start"`
	End   int `json:"end"`
}

// alignment is pocketsphinx's JSON: the utterance with its word segments, each with
// its begin and duration in seconds.
type alignment struct {
	Words []struct {
		Text     string  `json:"t"`
		Begin    float64 `json:"b"`
		Duration float64 `json:"d"`
	} `json:"w"`
}

// alignSearches are the aligner's settings, tried in turn until one aligns every word.
// pocketsphinx's default beams prune away the alignment of some synthetic voices
// (espeak-ng's, which start without silence), so that it finds no words at all; a
// sentence is short, so a wide search costs little. The last leaves out the optional
// silences and noises between words, which can trap a search in the same way.
var alignSearches = [][]string{
	{"-beam", "1e-120", "-wbeam", "1e-100", "-pbeam", "1e-120"},
	{"-beam", "1e-120", "-wbeam", "1e-100", "-pbeam", "1e-120", "-fsgusefiller", "no"},
}

// align finds where each of words lies in the 16 kHz WAV file at path, by forced
// alignment with pocketsphinx (its command-line program, `pocketsphinx align`, and
// its default US English model). The aligner is deterministic: the same file and words
// give the same times.
func align(ctx context.Context, path string, words []string) ([]Word, error) {
	if err := checkAlignable(words); err != nil {
		return nil, err
	}
	var errs []error
	for _, search := range alignSearches {
		args := append(append([]string{"-loglevel", "ERROR"}, search...), "align", path)
		cmd, err := command(ctx, "pocketsphinx", append(args, words...)...)
		if err != nil {
			return nil, err
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return nil, fmt.Errorf("pocketsphinx align: %w: %s", err, strings.TrimSpace(stderr.String()))
			}
			return nil, fmt.Errorf("pocketsphinx align: %w", err)
		}
		aligned, err := parseAlignment(out, words)
		if err == nil {
			return aligned, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// parseAlignment reads pocketsphinx's output for words: the word segments in order,
// leaving out its silences and fillers (<sil>, [NOISE]) and the alternate
// pronunciation's mark ("and(2)").
func parseAlignment(out []byte, words []string) ([]Word, error) {
	var a alignment
	if err := json.Unmarshal(bytes.TrimSpace(out), &a); err != nil {
		return nil, fmt.Errorf("pocketsphinx align: its output %q: %w", truncate(string(out), 200), err)
	}
	var got []Word
	for _, w := range a.Words {
		text := w.Text
		if i := strings.IndexByte(text, '('); i > 0 {
			text = text[:i]
		}
		if text == "" || strings.ContainsAny(text[:1], "<[+") {
			continue
		}
		if math.IsNaN(w.Begin) || math.IsNaN(w.Duration) || w.Begin < 0 || w.Duration < 0 || w.Begin+w.Duration > 3600 {
			return nil, fmt.Errorf("pocketsphinx align: word %q at %v s for %v s", w.Text, w.Begin, w.Duration)
		}
		start := int(math.Round(w.Begin * Rate))
		got = append(got, Word{Text: text, Start: start, End: start + int(math.Round(w.Duration*Rate))})
	}
	if len(got) != len(words) {
		return nil, fmt.Errorf("pocketsphinx align: %d words aligned of %d (%q)", len(got), len(words), strings.Join(words, " "))
	}
	for i, w := range got {
		if w.Text != words[i] || i > 0 && w.Start < got[i-1].End {
			return nil, fmt.Errorf("pocketsphinx align: word %d is %q at %d–%d, want %q after the previous", i+1, w.Text, w.Start, w.End, words[i])
		}
	}
	return got, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
