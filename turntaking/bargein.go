package turntaking

import (
	"slices"
	"time"
)

// bargeIn is a barge-in under evaluation: a sound of the user's over the agent. It keeps
// what is known of the sound and decides what it is (decide, decideOnTranscript); the
// policy carries its decisions out.
type bargeIn struct {
	cfg BargeInConfig
	lex *lexicon

	onset time.Time
	// from is when the voice began that this sound goes on with: the onset of an earlier
	// sound over the same agent turn that it follows closely (Evidence.Rejoin), else
	// onset. Its length past MaxBackchannel counts from there.
	from      time.Time
	tentative bool // begun by a candidate that the VAD has not confirmed yet
	// agent is the agent turn it is over (nil: none).
	agent *agentTurn
	open  bool // the user is still speaking
	ended time.Time
	// realWords counts the words of the latest stable hypothesis that are not
	// backchannels.
	realWords  int
	minReached bool // the speech lasted the minimum duration
	resolved   bool
	// held: the agent's voice is held for it (ducked, or paused with Hold "pause").
	held bool
	// sound is the overlap module's latest evidence about it, prev and prev2 the two
	// decodes before (nil: no evidence, the recogniser's words decide as without the
	// module).
	sound       *OverlapSound
	prev, prev2 []ScoredWord
	// longChecked: the MaxBackchannel deadline has been looked at; farPast: the sound
	// has gone on half as long again (farPastBackchannel).
	longChecked, farPast bool
	// comebacks counts the times the sound went on after it had ended.
	comebacks int
	// heardBackchannel: a decode of the sound held a backchannel word.
	heardBackchannel bool
}

// newBargeIn begins weighing a sound that began at onset over agent turn agent.
func newBargeIn(cfg BargeInConfig, lex *lexicon, onset time.Time, agent *agentTurn, tentative bool) *bargeIn {
	return &bargeIn{cfg: cfg, lex: lex, onset: onset, from: onset, open: true, tentative: tentative, agent: agent}
}

// early reports whether the sound began within YieldWindow of the agent's first audible
// sound, or before it.
func (b *bargeIn) early() bool { return b.beganWithin(b.cfg.YieldWindow) }

// continuing reports whether the sound began within ContinueWindow of the agent's first
// audible sound: soon enough to be the user going on with a turn the agent took for
// ended.
func (b *bargeIn) continuing() bool { return b.beganWithin(b.cfg.ContinueWindow) }

// userWords reports whether the decodes cur and prev both hold a word that is none of the
// words of the agent's clauses played so far. A microphone that hears the speakers keeps a residue
// of the agent's voice after the echo canceller, and the overlap decodes hear it as the
// agent's own words ("you(1.00)" as the agent says "Anna, you"), which are no sign that
// the user goes on.
func (b *bargeIn) userWords(cur, prev []ScoredWord) bool {
	for _, dec := range [][]ScoredWord{cur, prev} {
		if !slices.ContainsFunc(dec, func(w ScoredWord) bool { return !b.agent.says(normalizeWord(w.Text)) }) {
			return false
		}
	}
	return true
}

// keepsUserTurn reports whether the sound, should it interrupt, goes on with the user's
// turn rather than takes the agent's: it began within ContinueWindow of a reply's first
// audible sound, and the reply was given on a prediction that the user's turn had ended.
// (A re-engagement answers no turn.)
func (b *bargeIn) keepsUserTurn() bool {
	return b.continuing() && b.agent.inReplyTo != 0
}

// beganWithin reports whether the sound began less than window (0: never) after the
// agent's turn first became audible, or before. An agent turn nobody heard yet is not
// interrupted: it is withdrawn (or paused) as the user goes on.
func (b *bargeIn) beganWithin(window time.Duration) bool {
	if window <= 0 || b.agent == nil || b.agent.audibleAt.IsZero() {
		return false
	}
	return b.onset.Before(b.agent.audibleAt.Add(window))
}

// outcome is what a barge-in's evidence says to do.
type outcome uint8

const (
	keepWeighing outcome = iota
	// interrupt: a real interruption; the agent stops.
	interrupt
	// hold: the sound goes on; the agent's voice is held (again).
	hold
	// release: the voice goes on as before, while the sound is still watched.
	release
	// resume: no interruption; the barge-in is over.
	resume
	// settle: no interruption by the overlap module's evidence; the barge-in is over, and
	// what the sound was is kept for its transcript.
	settle
)

// decision is an outcome and why.
type decision struct {
	outcome outcome
	reason  string
}

// confirm marks a tentative barge-in as speech the VAD confirmed, begun at onset.
func (b *bargeIn) confirm(onset time.Time) {
	b.tentative = false
	b.onset = onset
}

// speechEnded notes that the user stopped speaking at end.
func (b *bargeIn) speechEnded(end time.Time) {
	b.open = false
	b.ended = end
}

// hearWords takes the recogniser's stable words so far.
func (b *bargeIn) hearWords(words []string) { b.realWords = b.lex.realWords(words) }

// hearSound takes the overlap module's latest evidence.
func (b *bargeIn) hearSound(s *OverlapSound) {
	if b.sound != nil && s.Decodes != b.sound.Decodes {
		b.prev2, b.prev = b.prev, b.sound.Words
	}
	if b.sound != nil && b.sound.Ended && !s.Ended && !s.Final {
		b.comebacks++
	}
	if len(b.lex.backchannelWords(s.Words)) > 0 {
		b.heardBackchannel = true
	}
	b.sound = s
}

// deadline is when the barge-in must be looked at again: when its minimum duration is
// reached, when it has become too long to be a backchannel, or when the wait for its
// transcript is over (zero: not before more news).
func (b *bargeIn) deadline() time.Time {
	cfg := b.cfg
	if b.sound != nil {
		if cfg.MaxBackchannel > 0 && !b.longChecked && b.sound.Kind != SoundHum {
			return b.from.Add(cfg.MaxBackchannel)
		}
		return time.Time{} // the evidence comes as it comes
	}
	if b.tentative {
		return time.Time{} // the VAD confirms or withdraws it
	}
	if !b.open {
		return b.ended.Add(cfg.Grace)
	}
	if !b.minReached {
		return b.onset.Add(cfg.MinDuration)
	}
	if cfg.MaxBackchannel > 0 {
		return b.onset.Add(cfg.MaxBackchannel)
	}
	return time.Time{}
}

// decide weighs what is known at now: the overlap module's evidence when there is some,
// else the speech's length and the recogniser's words.
func (b *bargeIn) decide(now time.Time) decision {
	if b.sound != nil {
		return b.weighSound(now)
	}
	if b.tentative {
		return decision{} // not speech yet
	}
	cfg := b.cfg
	end := now
	if !b.open {
		end = b.ended
	}
	dur := end.Sub(b.onset)
	b.minReached = b.minReached || dur >= cfg.MinDuration
	switch {
	case b.early():
		return decision{interrupt, "barge-in: the user began as the agent did"}
	case b.minReached && cfg.MinWords > 0 && cfg.EarlyWords > 0 && b.realWords >= max(cfg.MinWords, cfg.EarlyWords),
		b.minReached && cfg.MinWords == 0,
		cfg.MaxBackchannel > 0 && dur >= cfg.MaxBackchannel:
		return decision{interrupt, "barge-in"}
	case !b.open && !now.Before(b.ended.Add(cfg.Grace)):
		// The user stopped and no transcript came to say otherwise: a cough, noise.
		return decision{resume, "false barge-in"}
	}
	return decision{}
}

// decideOnTranscript settles the barge-in with the final transcript of the speech.
func (b *bargeIn) decideOnTranscript(words []string) decision {
	if b.sound != nil {
		// The evidence did not find an interruption while the agent spoke; the agent went
		// on, and a late transcript does not stop it (the words may still be a turn of
		// their own, after the agent's: see backchannels.classify).
		return decision{settle, "no interruption in the transcript's time"}
	}
	if b.minReached && b.lex.realWords(words) >= max(b.cfg.MinWords, 1) {
		return decision{interrupt, "barge-in (final transcript)"}
	}
	return decision{resume, "backchannel or noise"}
}

// weighSound applies the evidence rules (EvidenceConfig) to the barge-in's sound.
func (b *bargeIn) weighSound(now time.Time) decision {
	s := b.sound
	cfg := b.cfg
	if s.Dropped {
		return decision{settle, "noise, not speech"}
	}
	if cfg.MaxBackchannel > 0 && !now.Before(b.from.Add(cfg.MaxBackchannel)) {
		b.longChecked = true
		b.farPast = !now.Before(b.from.Add(cfg.MaxBackchannel * farPastBackchannel / 2))
	}
	if reason := b.interruption(); reason != "" {
		return decision{interrupt, reason}
	}
	switch {
	case s.Final:
		return decision{settle, "backchannel or noise"}
	case s.Ended:
		return decision{release, "the sound ended"}
	case b.lex.backchannelHeard(s, b.prev):
		return decision{release, "a backchannel"}
	case s.Kind == SoundNoise || s.Kind == SoundUnknown:
		return decision{}
	}
	// The sound goes on (again): soft again.
	return decision{hold, "the sound goes on"}
}

// voiceComebacks is how often a voice over the agent must go on again after a pause,
// past MaxBackchannel, to interrupt however little its decodes agree: a single
// backchannel comes back at most once ("uh… huh"), and repeated ones ("yeah, yeah,
// yeah") are told by their words.
const voiceComebacks = 2

// farPastBackchannel, in halves of MaxBackchannel, is how long a voice goes on before a
// word its decodes hold anywhere, not only at their opening, interrupts
// (lexicon.steadyWord): a hum's drift, or a backchannel decoded as words, can hold one
// for a second ("you(0.1) actually(0.84)"), not for one and a half.
const farPastBackchannel = 3

// interruption returns why the sound is a real interruption, or "".
func (b *bargeIn) interruption() string {
	s := b.sound
	lex := b.lex
	ev := b.cfg.Evidence
	if s.Kind != SoundVoice && s.Kind != SoundHum {
		return "" // not a voice (yet): "stop" begins unvoiced, and its vowel decides
	}
	switch {
	case b.early():
		return "barge-in: the user began as the agent did"
	case s.Kind == SoundVoice && !s.Ended && b.continuing() && !b.heardBackchannel && b.userWords(s.Words, b.prev):
		return "barge-in: the user goes on with the turn"
	case s.DecodedTo >= ev.KeywordSound && lex.hasInterruptWord(s.Words, ev.KeywordConfidence):
		return "barge-in: an interrupt word"
	case lex.repeatedInterrupt(s.Words, b.prev):
		return "barge-in: interrupt words in two decodes"
	case lex.endsInInterrupt(s.Words, b.prev, b.prev2):
		return "barge-in: three decodes end in an interrupt word"
	}
	// Words (other than interrupt words) count once three decodes in a row agree on them,
	// from the first on: a long hum decodes into a drift of short words, some of them
	// confident, after a doubtful start.
	stable := lex.confidentLead(s.Words, b.prev, b.prev2)
	switch {
	case stable >= 2:
		return "barge-in: confident words"
	case s.Kind == SoundVoice && b.longChecked && !s.Ended && stable >= 1,
		s.Kind == SoundVoice && b.farPast && !s.Ended && lex.steadyWord(s.Words, b.prev, b.prev2):
		return "barge-in: too long for a backchannel"
	case s.Kind == SoundVoice && b.longChecked && !s.Ended && b.comebacks >= voiceComebacks &&
		lex.wordsBesideBackchannels(s.Words) > b.comebacks:
		// Someone who talks in phrases over the agent ("turn… off… the light…"): the
		// decodes of speech cut by pauses drift, and need not agree on any word. A
		// listener who repeats a backchannel ("okay, okay, right") comes back too, and
		// its decodes hold its words, with a guess or two at the phrase being heard: a
		// word beside the backchannels for each phrase tells speech.
		return "barge-in: the voice keeps coming back"
	}
	return ""
}
