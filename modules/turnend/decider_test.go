package turnend

import (
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/modules/turnend/prosody"
)

const ms = time.Millisecond

// testConfig is the default configuration with the holds the scenarios' times are
// written for (250 ms, 500 ms, 1.2 s), whatever the defaults become.
func testConfig() Config {
	c := DefaultConfig()
	c.Holds = Holds{Short: 250 * ms, Default: 500 * ms, Long: 1200 * ms}
	return c
}

// withPitch is the predictive policy that reads the pitch of the speech's end.
func withPitch(t *testing.T) Policy {
	t.Helper()
	c := testConfig()
	c.Pitch = true
	p, err := c.NewPolicy(700 * ms)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func predictive(t *testing.T) Policy {
	t.Helper()
	p, err := testConfig().NewPolicy(700 * ms)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// step is one thing that happens in a scenario.
type step struct {
	at    time.Duration // stream position reached before the step (Audio)
	start time.Duration // SpeechStart at (when > 0)
	end   time.Duration // SpeechEnd at (when > 0)
	words string        // Words (the last one ending at wordsEnd)
	wEnd  time.Duration
	prob  float64 // Completion of words (when > 0)
	pMax  float64 // the most prob can be (0: prob exactly)
	cand  int     // 1: Candidate, -1: CandidateDropped
	// interrupt: the manager stopped the agent for the user's speech (Interrupted);
	// kept: in the agent's first moments (UserKeptTurn).
	interrupt, kept bool
	// ending is the pitch cue SpeechEnd gets.
	ending prosody.Cue
}

// play feeds steps and advances the audio in 20 ms frames up to until; it returns the
// end of turn (nil if none) and where the stream was when it came.
func play(d *Decider, steps []step, until time.Duration) (*EndOfTurn, time.Duration) {
	pos := time.Duration(0)
	i := 0
	for pos <= until {
		for i < len(steps) && steps[i].at <= pos {
			s := steps[i]
			i++
			var e *EndOfTurn
			switch {
			case s.interrupt:
				d.Interrupted(s.kept)
			case s.cand == 1:
				d.Candidate()
			case s.cand == -1:
				e = d.CandidateDropped()
			case s.start > 0:
				d.SpeechStart(s.start)
			case s.end > 0:
				e = d.SpeechEnd(s.end, s.ending)
			case s.prob > 0 || s.pMax > 0:
				e = d.Completion(s.words, s.prob, max(s.prob, s.pMax))
			case s.words != "":
				e = d.Words(strings.Fields(s.words), s.wEnd)
			}
			if e != nil {
				return e, pos
			}
		}
		if e := d.Audio(pos); e != nil {
			return e, pos
		}
		pos += 20 * ms
	}
	return nil, pos
}

func TestDeciderScenarios(t *testing.T) {
	cases := []struct {
		name    string
		policy  Policy
		steps   []step
		wantAt  time.Duration // stream position of the end of turn; 0: none
		wantWhy string
	}{
		{
			name:   "silence policy waits its fixed silence",
			policy: Silence{After: 700 * ms},
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "what time is it", wEnd: 1100 * ms},
				{at: 1400 * ms, end: 1130 * ms},
			},
			wantAt: 1840 * ms, wantWhy: "silence",
		},
		{
			name:   "complete question with a confident model ends after the short hold",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "what time is it", wEnd: 1100 * ms},
				{at: 1250 * ms, words: "what time is it", prob: 0.8},
				{at: 1340 * ms, end: 1130 * ms},
			},
			wantAt: 1380 * ms, wantWhy: "complete",
		},
		{
			name:   "a complete question said with a falling pitch ends after the short hold",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "what time is it", wEnd: 1100 * ms},
				{at: 1250 * ms, words: "what time is it", prob: 0.8},
				{at: 1340 * ms, end: 1130 * ms, ending: prosody.Falling},
			},
			wantAt: 1380 * ms, wantWhy: "complete",
		},
		{
			name:   "words that could end a sentence said with a level pitch wait the default hold",
			policy: withPitch(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "pack a hat", wEnd: 1100 * ms},
				{at: 1250 * ms, words: "pack a hat", prob: 0.8},
				{at: 1340 * ms, end: 1130 * ms, ending: prosody.Level},
			},
			wantAt: 1640 * ms, wantWhy: "complete (p=0.80) but the pitch stays level",
		},
		{
			name:   "with the pitch off, a level ending changes nothing",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "pack a hat", wEnd: 1100 * ms},
				{at: 1250 * ms, words: "pack a hat", prob: 0.8},
				{at: 1340 * ms, end: 1130 * ms, ending: prosody.Level},
			},
			wantAt: 1380 * ms, wantWhy: "complete",
		},
		{
			name:   "a pause after 'the' waits long and the user goes on",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 900 * ms, words: "turn on the", wEnd: 850 * ms},
				{at: 900 * ms, words: "turn on the", prob: 0.9}, // a fooled model does not override grammar
				{at: 1100 * ms, end: 880 * ms},
				{at: 1900 * ms, cand: 1},
				{at: 1950 * ms, start: 1880 * ms},
			},
			wantAt: 0,
		},
		{
			name:   "without a model estimate the default hold applies",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "what time is it", wEnd: 1100 * ms},
				{at: 1340 * ms, end: 1130 * ms},
			},
			wantAt: 1640 * ms, wantWhy: "no completion estimate",
		},
		{
			name:   "stale words never end the turn early",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 800 * ms, words: "what time is it", wEnd: 600 * ms},
				{at: 800 * ms, words: "what time is it", prob: 0.9},
				{at: 1340 * ms, end: 1130 * ms}, // the recogniser has not heard the last second yet
			},
			wantAt: 1640 * ms, wantWhy: "undecided",
		},
		{
			name:   "a candidate that turns out to be noise does not restart the wait",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "what time is it", wEnd: 1100 * ms},
				{at: 1340 * ms, end: 1130 * ms},
				{at: 1400 * ms, cand: 1},
				{at: 1700 * ms, cand: -1},
			},
			wantAt: 1700 * ms, wantWhy: "no completion estimate",
		},
		{
			name:   "an estimate for other words is ignored",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1000 * ms, words: "what time", wEnd: 700 * ms},
				{at: 1000 * ms, words: "what time", prob: 0.9},
				{at: 1200 * ms, words: "what time is it", wEnd: 1100 * ms},
				{at: 1340 * ms, end: 1130 * ms},
			},
			wantAt: 1640 * ms, wantWhy: "no completion estimate",
		},
		{
			name:   "an unlikely completion waits long",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "what time is it", wEnd: 1100 * ms},
				{at: 1200 * ms, words: "what time is it", prob: 0.001},
				{at: 1340 * ms, end: 1130 * ms},
			},
			wantAt: 2340 * ms, wantWhy: "incomplete",
		},
		{
			name:   "an estimate known only as a range waits long only when all of it is unlikely",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "go forward ten meters", wEnd: 1100 * ms},
				// A server listed no end among its likeliest tokens: it may hold up to 3 %.
				{at: 1200 * ms, words: "go forward ten meters", pMax: 0.03},
				{at: 1340 * ms, end: 1130 * ms},
			},
			wantAt: 1640 * ms, wantWhy: "undecided (p=0.00–0.03)",
		},
		{
			name:   "a range below the threshold waits long",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "go forward ten meters", wEnd: 1100 * ms},
				{at: 1200 * ms, words: "go forward ten meters", pMax: 0.005},
				{at: 1340 * ms, end: 1130 * ms},
			},
			wantAt: 2340 * ms, wantWhy: "incomplete",
		},
		{
			name:   "a range is complete by its lower end",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "what time is it", wEnd: 1100 * ms},
				{at: 1200 * ms, words: "what time is it", prob: 0.25, pMax: 0.4},
				{at: 1340 * ms, end: 1130 * ms},
			},
			wantAt: 1640 * ms, wantWhy: "undecided (p=0.25–0.40)",
		},
		{
			name:   "a complete turn that stopped the agent waits at least after_interruption",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, cand: 1},
				{at: 200 * ms, interrupt: true}, // decided on the sound, before the VAD confirmed it
				{at: 300 * ms, start: 100 * ms},
				{at: 600 * ms, words: "turn off", wEnd: 550 * ms},
				{at: 600 * ms, words: "turn off", prob: 0.8},
				{at: 700 * ms, end: 580 * ms},
			},
			wantAt: 1380 * ms, wantWhy: "the user took the floor; complete",
		},
		{
			name:   "three words that stopped the agent are still the floor taken",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 300 * ms, interrupt: true},
				{at: 1100 * ms, words: "you go forward", wEnd: 1050 * ms},
				{at: 1100 * ms, words: "you go forward", prob: 0.8},
				{at: 1200 * ms, end: 1080 * ms},
			},
			wantAt: 1880 * ms, wantWhy: "the user took the floor; complete",
		},
		{
			name:   "a turn that stopped the agent and says what it wants ends by the policy",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 300 * ms, interrupt: true},
				{at: 900 * ms, words: "no i meant paris", wEnd: 850 * ms},
				{at: 900 * ms, words: "no i meant paris", prob: 0.8},
				{at: 1000 * ms, end: 880 * ms},
			},
			wantAt: 1140 * ms, wantWhy: "complete",
		},
		{
			name:   "a user who went on after a pause only the floor waited through keeps it",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 300 * ms, interrupt: true},
				{at: 500 * ms, words: "turn", wEnd: 450 * ms},
				{at: 500 * ms, words: "turn", prob: 0.8},
				{at: 600 * ms, end: 480 * ms},
				{at: 1100 * ms, cand: 1}, // 580 ms: the short hold would have ended the turn
				{at: 1200 * ms, start: 1060 * ms},
				{at: 1700 * ms, words: "turn off the light", wEnd: 1650 * ms},
				{at: 1700 * ms, words: "turn off the light", prob: 0.8},
				{at: 1800 * ms, end: 1680 * ms},
			},
			wantAt: 2480 * ms, wantWhy: "the user took the floor; complete",
		},
		{
			name:   "a pause the policy waited through anyway does not make the user hesitant",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 300 * ms, interrupt: true},
				{at: 500 * ms, words: "turn", wEnd: 450 * ms},
				{at: 500 * ms, words: "turn", prob: 0.8},
				{at: 600 * ms, end: 480 * ms},
				{at: 600 * ms, cand: 1}, // 100 ms: shorter than the short hold
				{at: 650 * ms, start: 580 * ms},
				{at: 1700 * ms, words: "turn off the light", wEnd: 1650 * ms},
				{at: 1700 * ms, words: "turn off the light", prob: 0.8},
				{at: 1800 * ms, end: 1680 * ms},
			},
			wantAt: 1940 * ms, wantWhy: "complete",
		},
		{
			name:   "the user who interrupted goes on after a pause the short hold would end",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 300 * ms, interrupt: true},
				{at: 600 * ms, words: "turn off", wEnd: 550 * ms},
				{at: 600 * ms, words: "turn off", prob: 0.8},
				{at: 700 * ms, end: 580 * ms},
				{at: 1200 * ms, cand: 1},
				{at: 1300 * ms, start: 1160 * ms},
			},
			wantAt: 0,
		},
		{
			name:   "after an interruption a longer hold stays",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 300 * ms, interrupt: true},
				{at: 600 * ms, words: "turn on the", wEnd: 550 * ms},
				{at: 700 * ms, end: 580 * ms},
			},
			wantAt: 1780 * ms, wantWhy: `ends with "the"`,
		},
		{
			name:   "an interrupt with no speech under way holds nothing",
			policy: predictive(t),
			steps: []step{
				{at: 50 * ms, interrupt: true}, // a transcript stopped the agent after the last turn ended
				{at: 100 * ms, start: 100 * ms},
				{at: 600 * ms, words: "turn off", wEnd: 550 * ms},
				{at: 600 * ms, words: "turn off", prob: 0.8},
				{at: 700 * ms, end: 580 * ms},
			},
			wantAt: 840 * ms, wantWhy: "complete",
		},
		{
			name:   "an interrupt during a candidate that proves noise holds nothing",
			policy: predictive(t),
			steps: []step{
				{at: 100 * ms, cand: 1},
				{at: 150 * ms, interrupt: true},
				{at: 200 * ms, cand: -1},
				{at: 300 * ms, start: 300 * ms},
				{at: 600 * ms, words: "turn off", wEnd: 550 * ms},
				{at: 600 * ms, words: "turn off", prob: 0.8},
				{at: 700 * ms, end: 580 * ms},
			},
			wantAt: 840 * ms, wantWhy: "complete",
		},
		{
			name:   "words policy: a trailing filler waits long",
			policy: Words{Holds: testConfig().Holds, Lexicon: mustLexicon(t, "en", nil)},
			steps: []step{
				{at: 100 * ms, start: 100 * ms},
				{at: 1200 * ms, words: "i would like um", wEnd: 1100 * ms},
				{at: 1340 * ms, end: 1130 * ms},
			},
			wantAt: 2340 * ms, wantWhy: `ends with "um"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecider(tc.policy, DefaultConfig().Waits())
			e, at := play(d, tc.steps, 3*time.Second)
			if tc.wantAt == 0 {
				if e != nil {
					t.Fatalf("turn ended at %v (%s); want no end", at, e.Reason)
				}
				return
			}
			if e == nil {
				t.Fatalf("no end of turn; want one at %v", tc.wantAt)
			}
			if at != tc.wantAt || !strings.Contains(e.Reason, tc.wantWhy) {
				t.Fatalf("end of turn at %v (%q, silence %v); want %v (%q)", at, e.Reason, e.Silence, tc.wantAt, tc.wantWhy)
			}
		})
	}
}

// TestOneWordKept: a turn whose voice stopped the agent in its first moments waits at
// least Waits.OneWordKept while it is one word long ("no, … not that one"), and ends by
// the policy once it is longer, as does the next turn.
func TestOneWordKept(t *testing.T) {
	waits := testConfig().Waits()
	turn := func(from time.Duration, kept bool, words string) []step {
		steps := []step{{at: from, cand: 1}}
		if kept {
			steps = append(steps, step{at: from + 60*ms, interrupt: true, kept: true})
		}
		return append(steps,
			step{at: from + 100*ms, start: from},
			step{at: from + 400*ms, words: words, wEnd: from + 350*ms},
			step{at: from + 400*ms, words: words, prob: 0.9},
			step{at: from + 500*ms, end: from + 400*ms})
	}
	short, oneWord := testConfig().Holds.Short, waits.OneWordKept
	for _, tc := range []struct {
		name  string
		kept  bool
		words string
		want  time.Duration // the end of the turn from 1 s; the next one's from 3 s
	}{
		{"one word, kept", true, "no", 400*ms + oneWord},
		{"two words, kept", true, "no wait", 400*ms + short},
		{"one word, not kept", false, "no", 400*ms + short},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecider(predictive(t), waits)
			// play advances in 20 ms frames: a hold is reached in the frame after.
			frame := func(at time.Duration) time.Duration { return (at + 19*ms).Truncate(20 * ms) }
			if e, at := play(d, turn(time.Second, tc.kept, tc.words), 3*time.Second); e == nil || at != frame(time.Second+tc.want) {
				t.Fatalf("the turn ended at %v (%+v); want %v", at, e, frame(time.Second+tc.want))
			}
			// play counts the stream from 0 again: the decider only looks at how far it got.
			if e, at := play(d, turn(3*time.Second, false, "no"), 5*time.Second); e == nil || at != frame(3400*ms+short) {
				t.Fatalf("the next turn ended at %v (%+v); want %v, the short hold", at, e, frame(3400*ms+short))
			}
		})
	}
}

// TestInterruptionHoldsOneTurn: the floor the user took by interrupting lasts for that
// turn; the next one ends by the policy alone.
func TestInterruptionHoldsOneTurn(t *testing.T) {
	d := NewDecider(predictive(t), Waits{FreshSlack: 300 * ms, AfterInterruption: 800 * ms})
	turn := func(from time.Duration, interrupt bool) []step {
		steps := []step{{at: from, start: from}}
		if interrupt {
			steps = append(steps, step{at: from + 100*ms, interrupt: true})
		}
		return append(steps,
			step{at: from + 500*ms, words: "no", wEnd: from + 450*ms},
			step{at: from + 500*ms, words: "no", prob: 0.9},
			step{at: from + 600*ms, end: from + 480*ms})
	}
	if e, at := play(d, turn(100*ms, true), 3*time.Second); e == nil || at != 1380*ms {
		t.Fatalf("the turn that interrupted ended at %v (%+v); want 1.38s", at, e)
	}
	// play counts the stream from 0 again: the decider only looks at how far it got.
	if e, at := play(d, turn(3100*ms, false), 5*time.Second); e == nil || at != 3840*ms {
		t.Fatalf("the next turn ended at %v (%+v); want 3.84s, the short hold", at, e)
	}
}

func TestLexicon(t *testing.T) {
	lex := mustLexicon(t, "en", []string{"please", "-the", "how about"})
	for words, want := range map[string]bool{
		"turn on the":                 false, // removed
		"turn on the light":           false,
		"set a timer for":             true,
		"i want to":                   true,
		"and um":                      true,
		"it is, you know":             true,
		"what time is it":             false,
		"lights off please":           true, // added
		"what do you think how about": true,
		"Coffee AND":                  true,
	} {
		if _, got := lex.Incomplete(strings.Fields(words)); got != want {
			t.Errorf("Incomplete(%q) = %v, want %v", words, got, want)
		}
	}
	if _, err := NewLexicon("xx", nil); err == nil {
		t.Error("a language without a list and no words gave no error")
	}
	if _, err := NewLexicon("xx", []string{"und"}); err != nil {
		t.Errorf("a language with given words: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []func(*Config){
		func(c *Config) { c.Policy = "magic" },
		func(c *Config) { c.Holds.Short = 0 },
		func(c *Config) { c.Holds.Long = c.Holds.Default - 1 },
		func(c *Config) { c.CompleteAbove = 1.5 },
		func(c *Config) { c.IncompleteBelow = 0.9 },
		func(c *Config) { c.FreshSlack = -1 },
		func(c *Config) { c.AfterInterruption = -1 },
	}
	for i, f := range bad {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("case %d: no error for %+v", i, c)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func mustLexicon(t *testing.T, lang string, extra []string) *Lexicon {
	t.Helper()
	l, err := NewLexicon(lang, extra)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
