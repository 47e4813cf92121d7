// Package wer measures word error rates: the text normalisation, the word alignment and
// the reader of the transcripts.tsv files that pair recordings with reference texts.
package wer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/parley-voice/parley/internal/regularfile"
)

// Normalize splits text into lower-case words without punctuation. Apostrophes inside a
// word stay ("don't"); hyphens and every other non-alphanumeric character separate words.
func Normalize(text string) []string {
	var words []string
	var b strings.Builder
	flush := func() {
		w := strings.Trim(b.String(), "'")
		if w != "" {
			words = append(words, w)
		}
		b.Reset()
	}
	for _, r := range text {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case r == '\'' || r == '’':
			b.WriteByte('\'')
		default:
			flush()
		}
	}
	flush()
	return words
}

// Result counts the edits that turn the reference into the hypothesis.
type Result struct {
	RefWords      int
	Substitutions int
	Deletions     int
	Insertions    int
}

// Errors is the number of word errors.
func (r Result) Errors() int { return r.Substitutions + r.Deletions + r.Insertions }

// Rate is the word error rate (errors per reference word); 0 for an empty reference
// and empty hypothesis, and the number of insertions when only the reference is empty.
func (r Result) Rate() float64 {
	if r.RefWords == 0 {
		return float64(r.Insertions)
	}
	return float64(r.Errors()) / float64(r.RefWords)
}

// Add sums two results (for a total over files).
func (r Result) Add(o Result) Result {
	return Result{
		RefWords:      r.RefWords + o.RefWords,
		Substitutions: r.Substitutions + o.Substitutions,
		Deletions:     r.Deletions + o.Deletions,
		Insertions:    r.Insertions + o.Insertions,
	}
}

func (r Result) String() string {
	return fmt.Sprintf("WER %.2f%% (%d errors: %d sub, %d del, %d ins; %d words)",
		100*r.Rate(), r.Errors(), r.Substitutions, r.Deletions, r.Insertions, r.RefWords)
}

// Compare aligns the normalised words of hyp to those of ref (Levenshtein distance over
// words) and counts the edits.
func Compare(ref, hyp string) Result {
	return Align(Normalize(ref), Normalize(hyp))
}

// Align counts the edits between two word sequences. Among alignments with the fewest
// errors it prefers substitutions, then deletions, so that counts are deterministic.
func Align(ref, hyp []string) Result {
	type cell struct{ cost, sub, del, ins int }
	prev := make([]cell, len(hyp)+1)
	cur := make([]cell, len(hyp)+1)
	for j := range prev {
		prev[j] = cell{cost: j, ins: j}
	}
	better := func(a, b cell) bool { return a.cost < b.cost }
	for i := 1; i <= len(ref); i++ {
		cur[0] = cell{cost: i, del: i}
		for j := 1; j <= len(hyp); j++ {
			best := prev[j-1]
			if ref[i-1] != hyp[j-1] {
				best.cost++
				best.sub++
			}
			if d := prev[j]; better(cell{cost: d.cost + 1}, best) {
				best = d
				best.cost++
				best.del++
			}
			if n := cur[j-1]; better(cell{cost: n.cost + 1}, best) {
				best = n
				best.cost++
				best.ins++
			}
			cur[j] = best
		}
		prev, cur = cur, prev
	}
	c := prev[len(hyp)]
	return Result{RefWords: len(ref), Substitutions: c.sub, Deletions: c.del, Insertions: c.ins}
}

// Transcript is one line of a transcripts.tsv file.
type Transcript struct {
	// File is the recording's file name, relative to the TSV file's folder.
	File string
	// Text is the reference transcript.
	Text string
	// Source and Licence describe where the recording comes from, when given.
	Source, Licence string
}

// ReadTranscripts parses a tab-separated transcripts file: a header line naming the
// columns (at least "file" and "transcript"; "source" and "licence" are optional), then
// one recording per line. Blank lines are skipped. File names must stay inside the
// file's folder.
func ReadTranscripts(r io.Reader) ([]Transcript, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxTranscriptLine)
	line := 0
	cols := map[string]int{}
	var out []Transcript
	for sc.Scan() {
		line++
		text := strings.TrimRight(sc.Text(), "\r")
		if line == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
			for i, name := range strings.Split(text, "\t") {
				name = strings.ToLower(strings.TrimSpace(name))
				if _, dup := cols[name]; !dup && name != "" {
					cols[name] = i
				}
			}
			if _, ok := cols["file"]; !ok {
				return nil, errors.New("transcripts: line 1: no \"file\" column in the header")
			}
			if _, ok := cols["transcript"]; !ok {
				return nil, errors.New("transcripts: line 1: no \"transcript\" column in the header")
			}
			continue
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		fields := strings.Split(text, "\t")
		get := func(name string) string {
			if i, ok := cols[name]; ok && i < len(fields) {
				return strings.TrimSpace(fields[i])
			}
			return ""
		}
		t := Transcript{File: get("file"), Text: get("transcript"), Source: get("source"), Licence: get("licence")}
		if err := checkFile(t.File); err != nil {
			return nil, fmt.Errorf("transcripts: line %d: %w", line, err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("longer than %s, the limit for a line", regularfile.FormatBytes(maxTranscriptLine))
		}
		return nil, fmt.Errorf("transcripts: line %d: %w", line+1, err)
	}
	if line == 0 {
		return nil, errors.New("transcripts: empty file")
	}
	return out, nil
}

// maxTranscriptLine bounds one line of a transcripts file.
const maxTranscriptLine = 1 << 20

// MaxTranscriptsBytes bounds a transcripts file (a line holds at most 1 MiB).
const MaxTranscriptsBytes = 16 << 20

// LoadTranscripts reads the transcripts file at path (ReadTranscripts), which must be a
// regular file of at most MaxTranscriptsBytes: a FIFO or a device is refused, not read.
func LoadTranscripts(path string) ([]Transcript, error) {
	f, err := regularfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadTranscripts(regularfile.LimitReader(f, MaxTranscriptsBytes, path))
}

// checkFile accepts relative paths that stay inside the transcripts' folder.
func checkFile(name string) error {
	switch {
	case name == "":
		return errors.New("empty file name")
	case strings.ContainsRune(name, 0):
		return errors.New("file name contains a NUL byte")
	case filepath.IsAbs(name) || strings.HasPrefix(name, "/") || strings.HasPrefix(name, "\\"):
		return fmt.Errorf("file name %q is absolute", name)
	case !filepath.IsLocal(name):
		return fmt.Errorf("file name %q leaves the folder", name)
	}
	return nil
}
