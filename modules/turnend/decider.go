package turnend

import (
	"time"

	"github.com/parley-voice/parley/modules/turnend/prosody"
)

// EndOfTurn is what the Decider decides: the user's turn ended.
type EndOfTurn struct {
	// SpeechStart and SpeechEnd span the turn's speech (stream positions).
	SpeechStart, SpeechEnd time.Duration
	// Silence is how much silence followed SpeechEnd when the turn was ended.
	Silence time.Duration
	// Reason says which rule ended it.
	Reason string
}

// Decider applies a Policy to the user's speech as it is heard. It has no clock: time is
// the position in the audio stream, which advances with Audio, so a replay decides
// exactly as a live session does. It is not safe for concurrent use.
type Decider struct {
	policy Policy
	waits  Waits

	active      bool // speech was heard since the last end of turn
	speechStart time.Duration
	speechEnd   time.Duration
	segmentOpen bool
	candidate   bool // possible speech not yet confirmed or withdrawn
	pos         time.Duration

	// interrupted: the turn's speech stopped the agent. hesitant: since then the user
	// went on after a pause only the floor (Waits.AfterInterruption) waited through.
	// policyHold is the policy's own hold behind the decision: shorter when the
	// decision is the floor.
	interrupted, hesitant bool
	policyHold            time.Duration
	// kept: the turn's speech stopped the agent in its first moments (a reply given on a
	// prediction that the user's turn had ended).
	kept bool

	words        []string
	lastWordEnd  time.Duration
	completion   float64
	completeMax  float64
	completeText string
	hasComplete  bool
	// ending is the pitch cue of the speech's end (SpeechEnd).
	ending prosody.Cue

	decision Decision
	decided  bool // decision is up to date with the signals
}

// Waits are the Decider's timings besides the policy's holds.
type Waits struct {
	// FreshSlack is how far before the speech's end the last word may end and still
	// count as covering it (300 ms is a recogniser's word boundary uncertainty plus the
	// VAD's padding).
	FreshSlack time.Duration
	// AfterInterruption is the least hold of a turn whose speech stopped the agent, while
	// the turn holds at most openingWords words, and for the rest of the turn once the
	// user went on after a pause only this hold waited through.
	AfterInterruption time.Duration
	// OneWordKept is the least hold of a turn whose speech stopped the agent in its
	// first moments (Interrupted, kept) while the turn is one word long: that word is
	// as likely the opening of a correction, said before a pause ("no, … not that
	// one", "actually, … tell me about the moon"), as the last word of the turn the
	// agent answered too soon. Longer, it is the user's turn going on, and the policy
	// ends it.
	OneWordKept time.Duration
}

// openingWords: a user who stopped the agent and has said no more than this ("wait",
// "no", "hold on", "no no, wait", "turn…") has only taken the floor, and what they want
// follows; a longer turn ("no, I meant Paris") ends by the policy. Three, because a
// recogniser adds a word to a short phrase over the agent (festival kal's "go, forward"
// heard as "you go forward").
const openingWords = 3

// NewDecider returns a decider for policy.
func NewDecider(policy Policy, waits Waits) *Decider {
	return &Decider{policy: policy, waits: waits}
}

// Decision returns the policy's current decision for the turn in progress.
func (d *Decider) Decision() Decision {
	if !d.decided {
		d.decision = d.policy.Decide(d.signals())
		d.policyHold = d.decision.Hold
		if d.interrupted && (d.hesitant || len(d.words) <= openingWords) && d.decision.Hold < d.waits.AfterInterruption {
			d.decision = Decision{Hold: d.waits.AfterInterruption, Reason: "the user took the floor; " + d.decision.Reason}
		}
		if d.kept && len(d.words) <= 1 && d.decision.Hold < d.waits.OneWordKept {
			d.decision = Decision{Hold: d.waits.OneWordKept, Reason: "one word over the agent's start; " + d.decision.Reason}
		}
		d.decided = true
	}
	return d.decision
}

func (d *Decider) signals() Signals {
	s := Signals{Words: d.words, Prosody: d.ending}
	s.Fresh = len(d.words) > 0 && d.lastWordEnd >= d.speechEnd-d.waits.FreshSlack
	if d.hasComplete && d.completeText == joinWords(d.words) {
		s.Complete, s.CompleteMax, s.HasComplete = d.completion, d.completeMax, true
	}
	return s
}

// Interrupted: the agent was stopped for the user's speech. The turn in progress (or
// about to begin: the manager may decide on the sound before the VAD confirms it as
// speech) then waits at least Waits.AfterInterruption while it is a few words long: its
// speaker has taken the floor. A voice in the agent's first moments (kept, from
// control.Command.UserKeptTurn) took nothing: it is the user's turn going on, which
// waits at least Waits.OneWordKept while it is one word long. With neither turn (the
// turn had ended when its transcript stopped the agent) it changes nothing.
func (d *Decider) Interrupted(kept bool) {
	if !d.active && !d.candidate {
		return
	}
	if kept {
		d.kept = true
	} else {
		d.interrupted = true
	}
	d.decided = false
}

// Candidate: the VAD heard possible speech; no turn ends while it is open.
func (d *Decider) Candidate() { d.candidate = true }

// CandidateDropped: the possible speech was noise. The turn may end at once if its
// silence is long enough.
func (d *Decider) CandidateDropped() *EndOfTurn {
	d.candidate = false
	d.interrupted = d.interrupted && d.active
	d.kept = d.kept && d.active
	return d.check()
}

// TurnStart returns where the turn in progress began (ok false: none is).
func (d *Decider) TurnStart() (start time.Duration, ok bool) { return d.speechStart, d.active }

// SpeechStart: a speech segment began at start.
func (d *Decider) SpeechStart(start time.Duration) {
	if d.active && !d.segmentOpen && d.interrupted && !d.hesitant {
		// The user goes on after a pause: was it one only the floor waited through?
		floored := d.Decision().Hold > d.policyHold
		d.hesitant = floored && start-d.speechEnd >= d.policyHold
	}
	d.candidate = false
	d.segmentOpen = true
	if !d.active {
		d.active = true
		d.speechStart = start
	}
}

// SpeechEnd: the open segment ended at end (its padded end), its pitch as ending says.
func (d *Decider) SpeechEnd(end time.Duration, ending prosody.Cue) *EndOfTurn {
	d.segmentOpen = false
	d.speechEnd = end
	d.ending = ending
	d.decided = false
	return d.check()
}

// Words: the recogniser's words of the turn so far, and where the last one ends.
func (d *Decider) Words(words []string, lastEnd time.Duration) *EndOfTurn {
	d.words = append(d.words[:0], words...)
	d.lastWordEnd = lastEnd
	d.decided = false
	return d.check()
}

// Completion: the language model's probability that the turn is complete after text, p,
// and the most it can be, pMax (p when it is known exactly; a pMax below p is taken as
// p, so that Signals.CompleteMax is never below Signals.Complete).
func (d *Decider) Completion(text string, p, pMax float64) *EndOfTurn {
	d.completeText, d.completion, d.completeMax, d.hasComplete = text, p, max(p, pMax), true
	d.decided = false
	return d.check()
}

// Audio: the stream has reached pos.
func (d *Decider) Audio(pos time.Duration) *EndOfTurn {
	if pos > d.pos {
		d.pos = pos
	}
	return d.check()
}

// EndOfStream: the stream ended at end, and the VAD has reported all its speech. A turn
// in progress ends there.
func (d *Decider) EndOfStream(end time.Duration) *EndOfTurn {
	d.pos = max(d.pos, end)
	return d.Finish()
}

// Finish ends a turn in progress at the end of the stream.
func (d *Decider) Finish() *EndOfTurn {
	if !d.active {
		return nil
	}
	end := d.speechEnd
	if d.segmentOpen {
		end = d.pos
	}
	eot := &EndOfTurn{SpeechStart: d.speechStart, SpeechEnd: end, Silence: max(d.pos-end, 0), Reason: "end of stream"}
	d.reset()
	return eot
}

// check ends the turn when its silence has reached the policy's hold.
func (d *Decider) check() *EndOfTurn {
	if !d.active || d.segmentOpen || d.candidate {
		return nil
	}
	dec := d.Decision()
	silence := d.pos - d.speechEnd
	if silence < dec.Hold {
		return nil
	}
	eot := &EndOfTurn{SpeechStart: d.speechStart, SpeechEnd: d.speechEnd, Silence: silence, Reason: dec.Reason}
	d.reset()
	return eot
}

func (d *Decider) reset() {
	d.active, d.segmentOpen, d.candidate = false, false, false
	d.interrupted, d.hesitant, d.kept = false, false, false
	d.words = d.words[:0]
	d.lastWordEnd = 0
	d.hasComplete = false
	d.ending = prosody.Unknown
	d.decided = false
}

func joinWords(words []string) string {
	n := 0
	for _, w := range words {
		n += len(w) + 1
	}
	b := make([]byte, 0, n)
	for i, w := range words {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, w...)
	}
	return string(b)
}
