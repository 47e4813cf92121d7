package overlaptable

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/wer"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/pipeline/internal/pipetest"
)

// outcome is what one scenario did, measured.
type overlapOutcome struct {
	s overlapSound
	// stopped: the agent's turn was interrupted; userTurns: user turns stored besides
	// the question; backchannel: what the history kept as backchannels (" / " between
	// two).
	stopped     bool
	userTurns   []string
	backchannel string
	reason      string // why the manager interrupted
	cutOK       bool   // the stored turn is exactly what was heard (barge-ins)
	// On the rendered output, from the sound's onset (or end): the longest stretch the
	// agent was silent where the reference is not; when the voice was ducked, when full
	// volume came back after the sound ended, when the agent fell silent for good.
	gap, duckAt, restoreAfter, silentAt time.Duration
	ducked, silenced                    bool
	minGain                             float64
}

// pass reports whether the outcome meets every target.
func (o overlapOutcome) pass() bool {
	if o.s.bargeIn {
		return o.stopped && o.cutOK && o.ducked && o.duckAt <= maxDuckDelay && o.silenced && o.silentAt <= maxSilence
	}
	return o.sound()
}

// sound reports whether the outcome keeps what must always hold: a backchannel or noise
// never stops the agent, never becomes a user turn, leaves no silence and gives the
// voice back in time; a barge-in that stops the agent leaves exactly the words heard in
// the history, and one that does not is not lost (it is a user turn after the agent's).
func (o overlapOutcome) sound() bool {
	if o.s.bargeIn {
		if o.stopped {
			return o.cutOK
		}
		return len(o.userTurns) > 0
	}
	return !o.stopped && len(o.userTurns) == 0 && o.gap <= maxGap && o.restoreAfter <= maxRestore
}

// minBargeInsOnTime is how many of the barge-ins must meet both timing targets (ducked
// and silent in time). The recogniser does not name every barge-in's first word within
// 300 ms in every voice (an unstressed /h/ is heard late), and Silero reacts to unvoiced
// onsets ("stop", "wait") a window late. Where in a 32 ms window the sounds begin moves
// that too: placed 700 ms into the answer they begin 12 ms into one, and six of them are
// ducked a window later (140 ms).
const minBargeInsOnTime = 17

// alignedGains compares the rendered output with the reference window by window from
// window from to window to: a pause or a late chunk shifts the rendered output from
// the reference by a few milliseconds, so each 100 ms block of the rendered output is
// first matched with the reference at the lag (within ±40 ms) that correlates best. It
// returns the reference's levels (dBFS, aligned) and the rendered level relative to them
// (dB), for every window (zero outside from–to).
func alignedGains(got, ref audio.Frame, from, to int) (refLevels, gains []float64) {
	n := int(audio.DurationToSamples(pipetest.Window, got.Rate))
	block := 10 * n
	maxLag := 4 * n
	windows := len(ref.Samples) / n
	refLevels, gains = make([]float64, windows), make([]float64, windows)
	for i := range windows {
		refLevels[i] = audio.DBFS(audio.RMS(ref.Samples[i*n : (i+1)*n]))
	}
	for b := max(from, 0) * n; b < min(to*n, len(ref.Samples)); b += block {
		best, bestLag := -2.0, 0
		for lag := -maxLag; lag <= maxLag; lag++ {
			if c := correlation(got.Samples, ref.Samples, b, b+lag, block); c > best {
				best, bestLag = c, lag
			}
		}
		for i := b / n; i < (b+block)/n && i < windows; i++ {
			var eg, er float64
			for k := i * n; k < (i+1)*n; k++ {
				g, r := sampleAt(got.Samples, k), sampleAt(ref.Samples, k+bestLag)
				eg += g * g
				er += r * r
			}
			refLevels[i] = audio.DBFS(math.Sqrt(er / float64(n)))
			switch {
			case er == 0:
				gains[i] = 0
			case eg == 0:
				gains[i] = -100
			default:
				gains[i] = 10 * math.Log10(eg/er)
			}
		}
	}
	return refLevels, gains
}

// correlation returns the normalised correlation of the n samples of x from xFrom with
// the n samples of y from yFrom, samples outside either slice counting as silence; -2
// when either stretch is silent.
func correlation(x, y []float32, xFrom, yFrom, n int) float64 {
	var xy, xx, yy float64
	for k := range n {
		a, b := sampleAt(x, xFrom+k), sampleAt(y, yFrom+k)
		xy += a * b
		xx += a * a
		yy += b * b
	}
	if xx == 0 || yy == 0 {
		return -2
	}
	return xy / math.Sqrt(xx*yy)
}

// sampleAt returns s[i], or silence outside s.
func sampleAt(s []float32, i int) float64 {
	if i < 0 || i >= len(s) {
		return 0
	}
	return float64(s[i])
}

// levels returns the RMS level (dBFS) of every window of samples.
func levels(f audio.Frame) []float64 {
	n := int(audio.DurationToSamples(pipetest.Window, f.Rate))
	var out []float64
	for i := 0; i+n <= len(f.Samples); i += n {
		out = append(out, audio.DBFS(audio.RMS(f.Samples[i:i+n])))
	}
	return out
}

// ownReference returns what the speaker would have rendered of the agent's answer (turn,
// rendered from the time from on) had nothing been said over it: the turn's chunks (not
// those of a withdrawn preparation) one after the other, resampled to the output's rate
// and placed where the rendered output begins them. Each replay is its own reference:
// espeak-ng does not give the same samples for the same text twice (its noise source
// and pitch flutter carry state from one synthesis to the next), and how many withdrawn
// preparations a replay synthesised depends on the order of events that fall on the
// same virtual instant, so another replay's answer drifts from this one's by tens of
// milliseconds.
func ownReference(t *testing.T, rec *pipetest.Record, got audio.Frame, turn int, from time.Duration) audio.Frame {
	t.Helper()
	var samples []float32
	rate := 0
	for _, id := range rec.Order {
		c := rec.Chunks[id]
		if c.TurnID != turn || rec.Revoked[id] {
			continue
		}
		if rate != 0 && c.Audio.Rate != rate {
			t.Fatalf("the answer's chunks come at %d and %d Hz", rate, c.Audio.Rate)
		}
		rate = c.Audio.Rate
		samples = append(samples, c.Audio.Samples...)
	}
	if len(samples) == 0 {
		t.Fatal("the replay has no chunk of the answer")
	}
	if rate != got.Rate {
		rs, err := audio.NewResampler(rate, got.Rate, 1, audio.QualityDefault)
		if err != nil {
			t.Fatal(err)
		}
		samples = append(rs.Process(samples), rs.Flush()...)
	}
	firstSound := func(x []float32) int {
		return slices.IndexFunc(x, func(v float32) bool { return math.Abs(float64(v)) > 1e-3 })
	}
	skip := min(int(audio.DurationToSamples(from, got.Rate)), len(got.Samples))
	gotStart, refStart := firstSound(got.Samples[skip:]), firstSound(samples)
	if gotStart < 0 || refStart < 0 {
		t.Fatal("the answer is silent")
	}
	gotStart += skip
	// The first sound of each places them within a few samples; the best correlation
	// over the answer's first 200 ms places them exactly.
	n := int(audio.DurationToSamples(200*time.Millisecond, got.Rate))
	best, offset := -2.0, 0
	for d := -80; d <= 80; d++ {
		if c := correlation(got.Samples, samples, gotStart+d, refStart, n); c > best {
			best, offset = c, gotStart+d-refStart
		}
	}
	if best < 0.99 {
		t.Fatalf("the rendered answer does not begin with its chunks (correlation %.3f)", best)
	}
	ref := audio.Frame{Rate: got.Rate, Samples: make([]float32, len(got.Samples))}
	for k, v := range samples {
		if j := offset + k; j >= 0 && j < len(ref.Samples) {
			ref.Samples[j] = v
		}
	}
	return ref
}

// measureOverlap rates what the agent did in its answer turn with s over it.
func measureOverlap(t *testing.T, s overlapSound, place time.Duration, res *pipeline.ReplayResult, rec *pipetest.Record, refAudio audio.Frame, turn int) overlapOutcome {
	t.Helper()
	o := overlapOutcome{s: s, minGain: 0}
	for _, u := range res.History.Utterances() {
		switch {
		case u.TurnID < turn: // the questions and earlier answers
		case u.Speaker == dialogue.Agent && u.Interrupted && u.TurnID == turn:
			o.stopped = true
			o.cutOK = u.Text == pipetest.HeardText(t, rec, u.TurnID)
		case u.Speaker == dialogue.User && u.Backchannel && o.backchannel != "":
			o.backchannel += " / " + u.Text
		case u.Speaker == dialogue.User && u.Backchannel:
			o.backchannel = u.Text
		case u.Speaker == dialogue.User:
			o.userTurns = append(o.userTurns, u.Text)
		}
	}
	for _, c := range rec.Commands {
		if c.Action == control.Interrupt && c.TurnID == turn {
			o.reason = c.Reason
		}
	}
	gotAudio := pipetest.AgentAudio(t, res)
	got := levels(gotAudio)
	first := int(place / pipetest.Window)
	end := first + int((s.length+pipetest.Window-1)/pipetest.Window)
	ref, gains := alignedGains(gotAudio, refAudio, first-20, first+int(3*time.Second/pipetest.Window))
	// The alignment (alignedGains) absorbs the few milliseconds by which the rendered
	// output may be shifted from the reference; still, each figure asks for more than
	// one window: ducked is two windows in a row 10.5 dB or more
	// below the reference (-12 dB is the duck level), a silence is windows in a row silent
	// where the reference speaks, and full volume is 200 ms of the reference's speech at a
	// median within 1 dB of it, nine windows in ten no more than 6 dB below (a word's edge
	// can still fall between two windows).
	gain := func(i int) (float64, bool) {
		if i >= len(ref) || ref[i] < -45 {
			return 0, false
		}
		return gains[i], true
	}
	run := 0
	for i := first; i < len(ref) && i < first+int(3*time.Second/pipetest.Window); i++ {
		g, speaks := gain(i)
		switch {
		case !speaks:
			run = 0 // a pause in the answer itself
		case g < -40 && (i >= len(got) || got[i] < -60):
			run++
			o.gap = max(o.gap, pipetest.At(run))
		default:
			run = 0
		}
	}
	// Ducking is measured without the alignment: it comes within the first 150 ms, before
	// anything can shift the output, and a block's alignment blurs a 10 ms ramp.
	rawRef := levels(refAudio)
	rawGain := func(i int) (float64, bool) {
		if i >= len(rawRef) || rawRef[i] < -45 {
			return 0, false
		}
		if i >= len(got) {
			return -100, true
		}
		return got[i] - rawRef[i], true
	}
	for i := first; i < first+int(time.Second/pipetest.Window) && i < len(ref); i++ {
		g, speaks := rawGain(i)
		if !speaks {
			continue
		}
		o.minGain = min(o.minGain, max(g, -60))
		next, nextSpeaks := rawGain(i + 1)
		if !o.ducked && g <= -10.5 && nextSpeaks && next <= -10.5 {
			o.ducked, o.duckAt = true, pipetest.At(i-first+1)
		}
	}
	if !s.bargeIn {
		for i := end; i < len(ref); i++ {
			var gs []float64
			for j := i; j < len(ref) && len(gs) < int(200*time.Millisecond/pipetest.Window); j++ {
				if g, speaks := gain(j); speaks {
					gs = append(gs, g)
				}
			}
			if len(gs) == 0 {
				break
			}
			sorted := slices.Clone(gs)
			slices.Sort(sorted)
			if sorted[len(sorted)/2] >= -1 && sorted[len(sorted)/10] >= -6 {
				o.restoreAfter = pipetest.At(max(i-end, 0))
				break
			}
		}
	}
	// Silent for good: the first window after which the rendered output stays silent
	// for at least 500 ms.
	if s.bargeIn {
		for i := first; i < len(got); i++ {
			quiet := true
			for j := i; j < len(got) && j < i+int(500*time.Millisecond/pipetest.Window); j++ {
				if got[j] > -60 {
					quiet = false
					break
				}
			}
			if quiet {
				o.silenced, o.silentAt = true, pipetest.At(i-first)
				break
			}
		}
	}
	return o
}

func describeOutcome(o overlapOutcome) string {
	var b strings.Builder
	if o.s.bargeIn {
		fmt.Fprintf(&b, "barge-in: stopped %v (%s), history cut to what was heard %v, ducked after %v, silent after %v, user turns %q, backchannels %q",
			o.stopped, o.reason, o.cutOK, show(o.ducked, o.duckAt), show(o.silenced, o.silentAt), o.userTurns, o.backchannel)
	} else {
		fmt.Fprintf(&b, "backchannel: stopped %v (%s), user turns %q, longest silence %v, full volume %v after it ended", o.stopped, o.reason, o.userTurns, o.gap, o.restoreAfter)
	}
	return b.String()
}

func show(ok bool, d time.Duration) string {
	if !ok {
		return "never"
	}
	return d.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%d", d.Milliseconds()) }

func overlapTable(outcomes []overlapOutcome) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "voice\tsound\tlength ms\tkind\tstopped\tuser turn\tstored as backchannel\tducked ms\tlowest dB\tsilence ms\tfull volume ms after end\tsilent ms after onset\tpass")
	pass, bcPass, bcN, biPass, biN := 0, 0, 0, 0, 0
	var heard wer.Result // the barge-ins' user turns against their words
	for _, o := range outcomes {
		kind, silentAt, restore, gap := "backchannel", "–", ms(o.restoreAfter), ms(o.gap)
		if o.s.bargeIn {
			heard = heard.Add(wer.Compare(o.s.text, strings.Join(o.userTurns, " ")))
			kind, silentAt, restore, gap = "barge-in", show(o.silenced, o.silentAt), "–", "–"
			silentAt = strings.TrimSuffix(silentAt, "ms")
			if o.silenced {
				silentAt = ms(o.silentAt)
			}
			biN++
		} else {
			bcN++
		}
		duck := "–"
		if o.ducked {
			duck = ms(o.duckAt)
		}
		turn := "no"
		if len(o.userTurns) > 0 {
			turn = strings.Join(o.userTurns, " / ")
		}
		p := "yes"
		if !o.pass() {
			p = "NO"
		} else {
			pass++
			if o.s.bargeIn {
				biPass++
			} else {
				bcPass++
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%v\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\n", o.s.voice, o.s.text, o.s.length.Milliseconds(), kind, o.stopped,
			turn, o.backchannel, duck, o.minGain, gap, restore, silentAt, p)
	}
	tw.Flush()
	fmt.Fprintf(&b, "backchannels and noises: %d of %d pass; barge-ins: %d of %d pass; %d of %d in all\n", bcPass, bcN, biPass, biN, pass, len(outcomes))
	fmt.Fprintf(&b, "the barge-ins' user turns against what was said: %v\n", heard)
	return b.String()
}

// overlapTimeline lists the updates that show how a sound over the agent was handled:
// the VAD's, the overlap module's, the manager's commands and backchannels, the
// speaker's changes of state and level.
func overlapTimeline(t *testing.T, res *pipeline.ReplayResult, from time.Duration) string {
	return pipetest.SoundTimeline(filepath.Join(res.OutDir, "timeline.jsonl"), from-100*time.Millisecond, from+3*time.Second)
}
