package overlaptest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/internal/voices"
	"github.com/parley-voice/parley/internal/wer"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/pipeline/internal/pipetest"
)

// The sounds over the agent: what a listener does while someone talks (hums,
// acknowledgements, coughs, knocks) and real interruptions, in voices no other test
// uses (Debian's flite and festival) and synthesised. Each is replayed through the whole
// pipeline on the virtual clock (Silero VAD, pocketsphinx, stories260K through
// llama.cpp, espeak-ng, the file speaker with its 50 ms output latency), placed while
// the agent answers a question, and measured on the speaker's rendered output
// (agent.wav) against the same replay's answer as it would have sounded untouched
// (ownReference).

// overlapVoices are the voices the scenarios speak in.
var overlapVoices = []voices.Voice{voices.FliteSLT, voices.FliteRMS, voices.FliteAWB, voices.FestivalKAL, voices.FestivalSLT}

// The phrases: backchannels (the agent must go on), and barge-ins (it must stop).
var (
	backchannelTexts = []string{"yeah", "okay", "right", "I see", "mm-hmm", "uh-huh", "hmm"}
	bargeInTexts     = []string{"wait, stop", "no, I meant the other one", "stop", "hold on a second", "what happened to the dragon after that"}
)

// Targets.
const (
	maxGap       = 50 * time.Millisecond  // silence a backchannel may cause
	maxRestore   = 300 * time.Millisecond // full volume after a backchannel ended
	maxDuckDelay = 120 * time.Millisecond // ducked after a barge-in's onset
	maxSilence   = 400 * time.Millisecond // silent after a barge-in's onset
)

// overlapSound is one sound placed over the agent.
type overlapSound struct {
	voice   string // "flite:slt", or "synth"
	text    string // the phrase, or the synthesised sound's name
	bargeIn bool   // a real interruption
	path    string
	onset   time.Duration // of the sound within its file
	length  time.Duration
}

func overlapSounds(t *testing.T, cache *voices.Cache) []overlapSound {
	var out []overlapSound
	add := func(voice, text string, bargeIn bool, path string) {
		out = append(out, newOverlapSound(t, voice, text, bargeIn, path))
	}
	for _, v := range overlapVoices {
		for _, text := range backchannelTexts {
			add(v.String(), text, false, cache.Say(t, v, text))
		}
	}
	synth := []struct {
		name string
		mk   func() []float32
	}{
		{"hummed mm-hmm, 110 Hz", func() []float32 { return voices.Hum(voices.MmHmm, 110, 0.4) }},
		{"hummed mm-hmm, 210 Hz", func() []float32 { return voices.Hum(voices.MmHmm, 210, 0.4) }},
		{"hummed hmm, 120 Hz", func() []float32 { return voices.Hum(voices.Hmm, 120, 0.4) }},
		{"hummed mhm, 190 Hz", func() []float32 { return voices.Hum(voices.Mhm, 190, 0.4) }},
		{"cough 1", func() []float32 { return voices.Cough(1, 0.5) }},
		{"cough 2", func() []float32 { return voices.Cough(2, 0.5) }},
		{"two knocks", func() []float32 { return voices.Knock(1, 2, 0.6) }},
		{"three knocks", func() []float32 { return voices.Knock(3, 3, 0.6) }},
		{"noise burst 150 ms", func() []float32 { return voices.Noise(1, 0.15, 0.4) }},
		{"noise burst 300 ms", func() []float32 { return voices.Noise(2, 0.3, 0.3) }},
	}
	for _, s := range synth {
		add("synth", s.name, false, cache.Sound(t, s.name, s.mk))
	}
	for _, v := range overlapVoices {
		for _, text := range bargeInTexts {
			add(v.String(), text, true, cache.Say(t, v, text))
		}
	}
	return out
}

// newOverlapSound describes the recording at path: where its sound begins and how long
// it lasts.
func newOverlapSound(t *testing.T, voice, text string, bargeIn bool, path string) overlapSound {
	t.Helper()
	on, off := voices.Bounds(voices.Load(t, path))
	return overlapSound{voice: voice, text: text, bargeIn: bargeIn, path: path,
		onset: audio.SamplesToDuration(int64(on), voices.Rate), length: audio.SamplesToDuration(int64(off-on), voices.Rate)}
}

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
// onsets ("stop", "wait") a window late.
const minBargeInsOnTime = 18

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

// TestSoundsOverTheAgent replays every sound over the agent's answer and checks the
// targets; with -v it prints the table (docs/PERFORMANCE.md has its counts).
func TestSoundsOverTheAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("replays about eighty scenarios")
	}
	cfg := pipetest.DemoConfig(t)
	cfg.LLM.MaxTokens = 64           // a longer answer to talk over
	cfg.Dialogue.MinWordFraction = 1 // whole words only, so that heardText is the reference
	cache := voices.NewCache(t)
	sounds := overlapSounds(t, cache)
	question := filepath.Join(testenv.SharedDir(t), "audio", "v2j_what_time_is_it.wav")
	// Every replay hears the agent's answer as the first one did, so that the rows
	// differ only by the sound over it (sameVoice). PARLEY_OVERLAP_VOICING=k makes that
	// first answer another voicing, the same for every code: espeak-ng speaks k
	// sentences first.
	voice := pipetest.NewSameVoice()
	if k, err := strconv.Atoi(os.Getenv("PARLEY_OVERLAP_VOICING")); err == nil && k > 0 {
		pipetest.SpeakBefore(t, cfg, k)
	}

	// The sounds fall in the agent's first answer (turn 2). PARLEY_OVERLAP_ANSWER=2 puts
	// them in its second (turn 4), to a second question asked a second after the first
	// answer ends: on the simulated laptop the canceller has then heard the agent for a
	// whole answer.
	base, turn, from := []any{question, 0.5}, 2, time.Duration(0)
	if os.Getenv("PARLEY_OVERLAP_ANSWER") == "2" {
		first, _ := replayOverlap(t, cfg, voice, pipetest.WriteScenario(t, 8, base...))
		end := -1
		for i, l := range levels(pipetest.AgentAudio(t, first)) {
			if l > -50 {
				end = i
			}
		}
		from = pipetest.At(end+1) + time.Second
		lamp := filepath.Join(testenv.SharedDir(t), "audio", "v2j_turn_on_living_room_lamp.wav")
		base, turn = append(base, lamp, from.Seconds()), 4
	}
	// The questions alone, to find where the agent answers.
	ref, _ := replayOverlap(t, cfg, voice, pipetest.WriteScenario(t, 8, base...))
	speechAt := -1
	for i, l := range levels(pipetest.AgentAudio(t, ref)) {
		if pipetest.At(i) >= from && l > -50 {
			speechAt = i
			break
		}
	}
	if speechAt < 0 {
		t.Fatal("the answer is silent")
	}
	place := pipetest.At(speechAt) + 700*time.Millisecond // well inside the answer
	t.Logf("the agent answers (turn %d) from %v; sounds start at %v", turn, pipetest.At(speechAt), place)

	var outcomes []overlapOutcome
	for _, s := range sounds {
		name := strings.ReplaceAll(fmt.Sprintf("%s %s", s.voice, s.text), " ", "_")
		t.Run(name, func(t *testing.T) {
			start := place - s.onset // the sound itself begins at place
			res, rec := replayOverlap(t, cfg, voice, pipetest.WriteScenario(t, 6, append(slices.Clone(base), s.path, start.Seconds())...))
			refAudio := ownReference(t, rec, pipetest.AgentAudio(t, res), turn, from)
			o := measureOverlap(t, s, place, res, rec, refAudio, turn)
			outcomes = append(outcomes, o)
			if !o.pass() {
				if !o.sound() {
					t.Errorf("%s", describeOutcome(o))
				} else {
					t.Logf("misses a timing target: %s", describeOutcome(o))
				}
				t.Logf("what happened from the onset on:\n%s", overlapTimeline(t, res, place))
				got, refLevels := levels(pipetest.AgentAudio(t, res)), levels(refAudio)
				var b strings.Builder
				for i := int(place/pipetest.Window) - 10; i < int(place/pipetest.Window)+180 && i < len(got) && i < len(refLevels); i++ {
					fmt.Fprintf(&b, " %+.0f/%+.0f", got[i], refLevels[i])
				}
				t.Logf("levels (dB, rendered/reference) from 100 ms before the onset:%s", b.String())
			}
		})
	}
	onTime := 0
	for _, o := range outcomes {
		if o.s.bargeIn && o.pass() {
			onTime++
		}
	}
	if onTime < minBargeInsOnTime {
		t.Errorf("%d barge-ins were ducked within %v and silent within %v of their onset, want at least %d", onTime, maxDuckDelay, maxSilence, minBargeInsOnTime)
	}
	t.Logf("sounds over the agent (onset at %v into the answer; targets: backchannels silence ≤ %v, full volume ≤ %v after they end; barge-ins ducked ≤ %v, silent ≤ %v after onset):\n%s",
		place-pipetest.At(speechAt), maxGap, maxRestore, maxDuckDelay, maxSilence, overlapTable(outcomes))
}

// replayOverlap replays scenario with engines of its own: a model whose cache holds
// earlier replays could answer differently from the replay that placed the sounds. With
// voice, the agent says each text as in the replays before (sameVoice).
func replayOverlap(t *testing.T, cfg pipeline.Config, voice *pipetest.SameVoice, scenario string) (*pipeline.ReplayResult, *pipetest.Record) {
	t.Helper()
	eng, err := pipeline.LoadEngines(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	rec := pipetest.NewRecord()
	ctx, cancel := pipetest.ReplayContext(t)
	defer cancel()
	// PARLEY_OVERLAP_CLOCK=real replays in real time, decodes and all (slow, and the
	// measures then include the machine's load).
	real := os.Getenv("PARLEY_OVERLAP_CLOCK") == "real"
	opts := pipeline.ReplayOptions{Input: scenario, OutDir: t.TempDir(), Record: true, RealClock: real, Observers: []iu.Observer{rec}}
	if voice != nil {
		opts.Voice = voice.Wrap
	}
	// PARLEY_OVERLAP_LAPTOP=1 replays on the simulated laptop (room.Laptop), the echo
	// cancelled: the sounds then come over the session's first answer, while the
	// canceller still converges, or with PARLEY_OVERLAP_ANSWER=2 over its second.
	if os.Getenv("PARLEY_OVERLAP_LAPTOP") == "1" {
		echo := room.Laptop()
		opts.Echo = &echo
	}
	res, err := pipeline.Replay(ctx, cfg, eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res, rec
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

// TestHesitantBargeIns: a user who interrupts in phrases, with pauses between them
// ("turn… off… the light… please"), stops the agent, its turn is cut to the words
// heard, none of the user's phrases is stored as a backchannel, and the phrases are one
// user turn. The pauses cut the sound, the overlap decodes of it drift and need not
// agree on any word; the voice that keeps coming back past the longest backchannel
// interrupts (turntaking, voiceComebacks). Timing is logged, not judged: such a
// barge-in says less in its first 400 ms than the ones TestSoundsOverTheAgent times.
func TestHesitantBargeIns(t *testing.T) {
	if testing.Short() {
		t.Skip("replays thirteen scenarios")
	}
	cfg := pipetest.DemoConfig(t)
	cfg.LLM.MaxTokens = 64
	cfg.Dialogue.MinWordFraction = 1
	cache := voices.NewCache(t)
	question := filepath.Join(testenv.SharedDir(t), "audio", "v2j_what_time_is_it.wav")
	const place = 3500 * time.Millisecond // 1 s into the answer (TestSoundsOverTheAgent finds it at 2.55 s)
	// over says text in voice v over the answer and measures what the agent did.
	over := func(t *testing.T, v voices.Voice, text string, bargeIn bool) (overlapOutcome, *pipeline.ReplayResult) {
		s := newOverlapSound(t, v.String(), text, bargeIn, cache.Say(t, v, text))
		res, rec := replayOverlap(t, cfg, nil, pipetest.WriteScenario(t, 6, question, 0.5, s.path, (place-s.onset).Seconds()))
		return measureOverlap(t, s, place, res, rec, ownReference(t, rec, pipetest.AgentAudio(t, res), 2, 0), 2), res
	}
	for _, v := range []voices.Voice{voices.FliteRMS, voices.FestivalKAL} {
		for _, text := range []string{"go, forward, ten, meters", "turn... off... the light... please"} {
			t.Run(strings.ReplaceAll(v.String()+" "+text, " ", "_"), func(t *testing.T) {
				o, res := over(t, v, text, true)
				t.Logf("%s", describeOutcome(o))
				if !o.stopped || !o.cutOK {
					t.Errorf("%s\nwhat happened from the onset on:\n%s", describeOutcome(o), overlapTimeline(t, res, place))
				}
				// Its first phrases did not stop the agent, but they are the user's words.
				if o.backchannel != "" {
					t.Errorf("part of the barge-in stored as a backchannel: %s\nwhat happened from the onset on:\n%s",
						describeOutcome(o), overlapTimeline(t, res, place))
				}
				// Having stopped the agent, the user has the floor: the pauses between the
				// phrases do not end the turn (end_of_turn.after_interruption).
				if len(o.userTurns) != 1 {
					t.Errorf("the barge-in is %d user turns, want one: %s\nwhat happened from the onset on:\n%s",
						len(o.userTurns), describeOutcome(o), overlapTimeline(t, res, place))
				}
			})
		}
	}
	// Repeated backchannels come back after pauses too; the rule must not take them
	// for speech. (flite rms's "yeah, yeah, yeah" stops the agent by another rule: its
	// decodes agree on confident words, "he left he had".)
	for _, v := range []voices.Voice{voices.FliteRMS, voices.FestivalKAL, voices.FliteSLT} {
		for _, text := range []string{"yeah, yeah, yeah", "mm-hmm, mm-hmm", "okay, okay, right"} {
			t.Run(strings.ReplaceAll(v.String()+" "+text, " ", "_"), func(t *testing.T) {
				o, res := over(t, v, text, false)
				t.Logf("%v long: %s", o.s.length, describeOutcome(o))
				if strings.Contains(o.reason, "keeps coming back") {
					t.Errorf("a repeated backchannel taken for a barge-in in phrases: %s\nwhat happened from the onset on:\n%s",
						describeOutcome(o), overlapTimeline(t, res, place))
				}
			})
		}
	}
}
