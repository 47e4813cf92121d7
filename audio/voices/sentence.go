package voices

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/parley-voice/parley/audio"
)

// A user who pauses mid-turn does not sound as if they had finished: the item of a list
// before a pause keeps a level or rising pitch, a hesitation leaves its phrase open,
// "turn on the" ends on an unstressed word. A voice that says each part of such a turn
// as a sentence of its own ends every part as a finished sentence (a falling pitch, a
// lengthened last word), which no listener would hear as a pause. So a turn with pauses
// is spoken as one sentence, punctuated as its speaker means it, and cut at its words:
// Sentence aligns the words (pocketsphinx), and Part cuts between them, in the silence
// or at the quietest point there; whoever places the parts puts the pauses between.

// Filled pauses: a filler the voice says shorter than FillerLength is stretched to it
// (sox tempo, which keeps the pitch), as real ones last 300–600 ms; voices say them as
// short as any word.
const FillerLength = 450e-3 * Rate

// sentenceVersion changes when the way sentences are aligned, stretched or cut
// changes, so that the cache's old sentences and parts are not reused (the voices'
// own recordings stay).
const sentenceVersion = "s3"

// fillers are the words Sentence stretches.
var fillers = []string{"um", "uh", "uhm", "er", "erm", "ah"}

// minFillerTempo bounds the stretch: a filler is made at most 4 times as long.
const minFillerTempo = 0.25

// Sentence is a sentence a voice spoke in one go, with its words aligned.
type Sentence struct {
	Text string
	// Samples is the sentence's audio at Rate (as the cache stores it: 16-bit).
	Samples []float32
	// Words are Words(Text), where they lie in Samples.
	Words []Word
}

// sentenceFile is what the cache keeps beside a sentence's audio.
type sentenceFile struct {
	Text  string `json:"text"`
	Words []Word `json:"words"`
}

// Sentence returns text spoken by v in one go with its words aligned, making and
// aligning it if the cache does not hold it yet. Fillers ("um", "uh") shorter than
// FillerLength are stretched to it. Besides the voice's program it needs pocketsphinx
// (and sox for fillers).
func (c *Cache) Sentence(ctx context.Context, v Voice, text string) (*Sentence, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	words := Words(text)
	if err := checkAlignable(words); err != nil {
		return nil, fmt.Errorf("voices: %s %q: %w", v, text, err)
	}
	key := []string{sentenceVersion, v.Engine, v.Name, strconv.FormatFloat(v.Pitch, 'g', -1, 64), strconv.FormatFloat(v.Rate, 'g', -1, 64), text}
	wav, meta := c.path("sentence", key...), c.pathExt("sentence", ".json", key...)
	if s, err := loadSentence(wav, meta); err == nil {
		return s, nil
	}
	said, err := c.Say(ctx, v, text)
	if err != nil {
		return nil, err
	}
	aligned, err := align(ctx, said, words)
	if err != nil {
		return nil, fmt.Errorf("voices: %s %q: %w", v, text, err)
	}
	samples, err := Load(said)
	if err != nil {
		return nil, err
	}
	if samples, aligned, err = stretchFillers(ctx, samples, aligned); err != nil {
		return nil, fmt.Errorf("voices: %s %q: %w", v, text, err)
	}
	// The audio first, then what says it is complete.
	if err := c.store(wav, samples); err != nil {
		return nil, err
	}
	data, err := json.Marshal(sentenceFile{Text: text, Words: aligned})
	if err != nil {
		return nil, err
	}
	if err := c.storeFile(meta, data); err != nil {
		return nil, err
	}
	return loadSentence(wav, meta)
}

// loadSentence reads a sentence the cache holds.
func loadSentence(wav, meta string) (*Sentence, error) {
	data, err := os.ReadFile(meta)
	if err != nil {
		return nil, err
	}
	var f sentenceFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("voices: %s: %w", meta, err)
	}
	samples, err := Load(wav)
	if err != nil {
		return nil, err
	}
	for i, w := range f.Words {
		if w.Start < 0 || w.End < w.Start || w.End > len(samples) || i > 0 && w.Start < f.Words[i-1].End {
			return nil, fmt.Errorf("voices: %s: word %d at %d–%d", meta, i+1, w.Start, w.End)
		}
	}
	return &Sentence{Text: f.Text, Samples: samples, Words: f.Words}, nil
}

// SayWords returns a WAV file of the words from to to (counted from 1, both included)
// of text spoken by v as one sentence (Sentence), cut out of it (Part), making it if
// the cache does not hold it yet.
func (c *Cache) SayWords(ctx context.Context, v Voice, text string, from, to int) (string, error) {
	if n := len(Words(text)); from < 1 || to < from || to > n {
		return "", fmt.Errorf("voices: %q has %d words: no words %d to %d", text, n, from, to)
	}
	out := c.path("part", sentenceVersion, v.Engine, v.Name, strconv.FormatFloat(v.Pitch, 'g', -1, 64), strconv.FormatFloat(v.Rate, 'g', -1, 64), text,
		strconv.Itoa(from), strconv.Itoa(to))
	if err := v.Validate(); err != nil {
		return "", err
	}
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	s, err := c.Sentence(ctx, v, text)
	if err != nil {
		return "", err
	}
	return out, c.store(out, s.PlayablePart(from, to))
}

// edgeFade is how long a part fades in or out at a cut that lies in sound.
const edgeFade = Rate / 100

// PlayablePart is Part to be played alone: where a cut lies in sound rather than in
// the quiet between words (a voice that runs a filler into the next word), the part
// fades in or out over 10 ms there, so that it does not start or stop with a click.
// Elsewhere (at cuts in the quiet, and at the sentence's ends) it is Part, sample for
// sample.
func (s *Sentence) PlayablePart(from, to int) []float32 {
	part := s.Part(from, to)
	n := min(edgeFade, len(part)/2)
	if from > 1 && !s.quietAt(s.Cut(from-1)) {
		for i := range n {
			part[i] *= float32(0.5 - 0.5*math.Cos(math.Pi*float64(i)/float64(n)))
		}
	}
	if to < len(s.Words) && !s.quietAt(s.Cut(to)) {
		for i := range n {
			part[len(part)-1-i] *= float32(0.5 - 0.5*math.Cos(math.Pi*float64(i)/float64(n)))
		}
	}
	return part
}

// Part returns the sentence's audio from the cut before its from-th word to the cut
// after its to-th (words counted from 1): the sentence's start and end at its ends.
// The parts of consecutive words join into the sentence's audio, sample for sample.
func (s *Sentence) Part(from, to int) []float32 {
	return slices.Clone(s.Samples[s.Cut(from-1):s.Cut(to)])
}

// cutReach is how far from an aligned word boundary a cut may lie: the aligner's
// boundaries are 10 ms frames, and it gives a pause to either word beside it.
const cutReach = 80e-3 * Rate

// cutWindow is the length over which a cut's quietness is measured, and cutHop the
// step between the windows tried.
const (
	cutWindow = Rate / 100
	cutHop    = Rate / 400
)

// Cut returns the sample where the sentence is cut after its k-th word (0: its start;
// len(Words): its end). It lies where the audio is quietest between the k-th word and
// the next, near their aligned boundary: in the silence there when there is one (the
// one nearest the boundary), at a zero crossing, so that the parts neither click nor
// take a piece of the other's word. When it is not quiet there, it lies in the silence
// nearest the boundary up to the middle of the word after the next, if there is one.
func (s *Sentence) Cut(k int) int {
	switch {
	case k <= 0:
		return 0
	case k >= len(s.Words):
		return len(s.Samples)
	}
	before, after := s.Words[k-1], s.Words[k]
	boundary := (before.End + after.Start) / 2
	lo := max(before.End-int(cutReach), (before.Start+before.End)/2)
	hi := min(after.Start+int(cutReach), (after.Start+after.End)/2, len(s.Samples))
	if hi-lo < cutWindow {
		return clampCut(zeroCrossing(s.Samples, boundary, lo, hi), before, after)
	}
	type window struct{ at, energy float64 }
	var windows []window
	quietest := -1.0
	for w := lo; w+cutWindow <= hi; w += cutHop {
		var e float64
		for _, v := range s.Samples[w : w+cutWindow] {
			e += float64(v) * float64(v)
		}
		windows = append(windows, window{float64(w + cutWindow/2), e})
		if quietest < 0 || e < quietest {
			quietest = e
		}
	}
	// Within 3 dB of the quietest (or below −80 dBFS) is as quiet: of those, the one
	// nearest the boundary, so that a stop's closure inside a word is not taken for the
	// pause after it.
	floor := max(2*quietest, 1e-8*cutWindow)
	best, bestDist := boundary, -1.0
	for _, w := range windows {
		if w.energy > floor {
			continue
		}
		if d := abs(w.at - float64(boundary)); bestDist < 0 || d < bestDist {
			best, bestDist = int(w.at), d
		}
	}
	cut := clampCut(zeroCrossing(s.Samples, best, max(best-cutWindow/2, lo), min(best+cutWindow/2, hi)), before, after)
	if s.quietAt(cut) {
		return cut
	}
	// No quiet near the aligned boundary: the aligner may have placed a short word
	// wrongly (a schwa "a" in a filler's tail). A silence between the middle of the word
	// before and that of the word after next is where the speaker paused.
	end := len(s.Samples)
	if k+1 < len(s.Words) {
		end = (s.Words[k+1].Start + s.Words[k+1].End) / 2
	}
	if at, ok := s.silenceNear(boundary, (before.Start+before.End)/2, end); ok {
		return at
	}
	return cut
}

// cutQuiet is the level (RMS) below which a cut lies in the quiet between words:
// −50 dBFS.
const cutQuiet = 0.00316

// quietAt reports whether the audio around sample at is quiet (cutQuiet).
func (s *Sentence) quietAt(at int) bool {
	return audio.RMS(s.Samples[max(at-cutWindow/2, 0):min(at+cutWindow/2, len(s.Samples))]) <= cutQuiet
}

// silenceNear returns the middle of the silence in [lo, hi) nearest at (a stretch of
// cutWindow or more below cutQuiet), at a zero crossing.
func (s *Sentence) silenceNear(at, lo, hi int) (int, bool) {
	best, bestDist := 0, -1
	for w := lo; w+cutWindow <= hi; w += cutHop {
		if audio.RMS(s.Samples[w:w+cutWindow]) > cutQuiet {
			continue
		}
		mid := w + cutWindow/2
		if d := int(abs(float64(mid - at))); bestDist < 0 || d < bestDist {
			best, bestDist = mid, d
		}
	}
	if bestDist < 0 {
		return 0, false
	}
	return zeroCrossing(s.Samples, best, best-cutWindow/2, best+cutWindow/2), true
}

// clampCut keeps a cut after the first half of the word before and before the second
// half of the word after.
func clampCut(cut int, before, after Word) int {
	return min(max(cut, (before.Start+before.End)/2), (after.Start+after.End)/2)
}

// zeroCrossing returns the sample in [lo, hi) nearest at where the audio crosses zero
// (the sample before it has the other sign, or it is zero), or at when none does.
func zeroCrossing(x []float32, at, lo, hi int) int {
	lo, hi = max(lo, 1), min(hi, len(x))
	crosses := func(i int) bool { return i >= lo && i < hi && (x[i] == 0 || (x[i-1] < 0) != (x[i] < 0)) }
	for d := 0; at-d >= lo || at+d < hi; d++ {
		if crosses(at - d) {
			return at - d
		}
		if crosses(at + d) {
			return at + d
		}
	}
	return at
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// stretchFillers lengthens every filler word shorter than FillerLength to it, with sox
// tempo (the pitch kept): the filler's word ends where its stretched sound does, and
// the words after it move by as much.
func stretchFillers(ctx context.Context, samples []float32, words []Word) ([]float32, []Word, error) {
	words = slices.Clone(words)
	for i, w := range words {
		if !slices.Contains(fillers, w.Text) {
			continue
		}
		on, off := fillerSound(samples, words, i)
		if off-on >= int(FillerLength) || off-on < cutWindow {
			continue
		}
		tempo := max(float64(off-on)/FillerLength, minFillerTempo)
		long, err := soxTempo(ctx, samples[on:off], tempo)
		if err != nil {
			return nil, nil, fmt.Errorf("stretching %q: %w", w.Text, err)
		}
		// sox's tempo pads its output with a little silence: the sound alone joins the
		// audio around it.
		if a, b := audio.SoundBounds(long, Rate); b > a {
			long = long[a:b]
		}
		fade(samples[on:off], long)
		samples = slices.Concat(samples[:on], long, samples[off:])
		grown := len(long) - (off - on)
		words[i].End = max(w.End+grown, on+len(long))
		for j := i + 1; j < len(words); j++ {
			words[j].Start = max(words[j].Start+grown, words[j-1].End)
			words[j].End = max(words[j].End+grown, words[j].Start)
		}
	}
	return samples, words, nil
}

// fillerSound returns where the sound of words[i], a filler, lies: within its aligned
// span, without the silence the aligner gave it, and on past the span's end while it
// goes on sounding (up to the next word's middle, or fillerOverrun past the span), as
// the aligner may give a filler's last sounds to the word after it.
func fillerSound(samples []float32, words []Word, i int) (on, off int) {
	w := words[i]
	on, off = audio.SoundBounds(samples[w.Start:w.End], Rate)
	on, off = w.Start+on, w.Start+off
	if off <= on {
		return on, off
	}
	limit := len(samples)
	if i+1 < len(words) {
		limit = min(max((words[i+1].Start+words[i+1].End)/2, w.End+fillerOverrun), limit)
	}
	quiet := float64(audio.Peak(samples[on:off])) * fillerQuiet
	for off+cutWindow <= limit && audio.RMS(samples[off:off+cutWindow]) > quiet {
		off += cutWindow
	}
	return on, off
}

// fillerOverrun is how far past its aligned span a filler's sound is followed.
const fillerOverrun = 60e-3 * Rate

// fillerQuiet is the level, relative to a filler's peak, below which its sound has
// ended (−35 dB, as audio.SoundBounds).
const fillerQuiet = 0.0178

// fadeLength is the cross-fade at each end of a stretched filler.
const fadeLength = Rate / 200

// fade cross-fades the ends of long, which replaces orig, into orig's ends, so that
// the stretched sound joins the audio around it without a click.
func fade(orig, long []float32) {
	n := min(fadeLength, len(orig)/4, len(long)/4)
	for i := 0; i < n; i++ {
		w := float32(i) / float32(n)
		long[i] = orig[i]*(1-w) + long[i]*w
		j, k := len(long)-1-i, len(orig)-1-i
		long[j] = orig[k]*(1-w) + long[j]*w
	}
}

// soxTempo plays samples (at Rate) at tempo times their speed, keeping their pitch.
func soxTempo(ctx context.Context, samples []float32, tempo float64) ([]float32, error) {
	raw := []string{"-t", "raw", "-e", "floating-point", "-b", "32", "-L", "-r", strconv.Itoa(Rate), "-c", "1"}
	args := slices.Concat([]string{"-R", "-D"}, raw, []string{"-"}, raw, []string{"-", "tempo", "-s", strconv.FormatFloat(tempo, 'f', 4, 64)})
	cmd, err := command(ctx, "sox", args...)
	if err != nil {
		return nil, err
	}
	cmd.Stdin = bytesOf(samples)
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("sox tempo: %w", err)
	}
	return floatsOf(out), nil
}
