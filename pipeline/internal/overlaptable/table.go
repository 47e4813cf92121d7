package overlaptable

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/internal/voices"
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

// Kind is which part of the table a test replays.
type Kind int

const (
	// Backchannels are the backchannels and noises: the agent must go on.
	Backchannels Kind = iota
	// BargeIns are the real interruptions: the agent must stop.
	BargeIns
)

// overlapSounds returns the sounds of kind, made or taken from cache.
func overlapSounds(t *testing.T, cache *voices.Cache, kind Kind) []overlapSound {
	var out []overlapSound
	add := func(voice, text string, bargeIn bool, path func() string) {
		if bargeIn == (kind == BargeIns) {
			out = append(out, newOverlapSound(t, voice, text, bargeIn, path()))
		}
	}
	for _, v := range overlapVoices {
		for _, text := range backchannelTexts {
			add(v.String(), text, false, func() string { return cache.Say(t, v, text) })
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
		add("synth", s.name, false, func() string { return cache.Sound(t, s.name, s.mk) })
	}
	for _, v := range overlapVoices {
		for _, text := range bargeInTexts {
			add(v.String(), text, true, func() string { return cache.Say(t, v, text) })
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

// Sounds replays every sound of kind over the agent's answer and checks the targets;
// with -v it prints its part of the table (docs/PERFORMANCE.md has the counts). The two
// kinds run in processes of their own (overlaptest, bargeintest), each hearing the
// voicing of the answer a fresh process's first replay hears, as one process running the
// whole table would.
func Sounds(t *testing.T, kind Kind) {
	if testing.Short() {
		t.Skip("replays about eighty scenarios")
	}
	cfg := pipetest.DemoConfig(t)
	cfg.LLM.MaxTokens = 64           // a longer answer to talk over
	cfg.Dialogue.MinWordFraction = 1 // whole words only, so that heardText is the reference
	cache := voices.NewCache(t)
	sounds := overlapSounds(t, cache, kind)
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
	if kind == BargeIns && onTime < minBargeInsOnTime {
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

// HesitantBargeIns: a user who interrupts in phrases, with pauses between them
// ("turn… off… the light… please"), stops the agent, its turn is cut to the words
// heard, none of the user's phrases is stored as a backchannel, and the phrases are one
// user turn. The pauses cut the sound, the overlap decodes of it drift and need not
// agree on any word; the voice that keeps coming back past the longest backchannel
// interrupts (turntaking, voiceComebacks). Timing is logged, not judged: such a
// barge-in says less in its first 400 ms than the ones Sounds times.
func HesitantBargeIns(t *testing.T) {
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
