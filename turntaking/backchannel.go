package turntaking

import (
	"slices"
	"strings"
	"time"
)

// Soft barge-ins: at the first sound of the user the agent's voice is ducked, not
// stopped, and the overlap module's evidence about the sound — decodes of it every few
// tens of milliseconds, its acoustics, its length — decides early whether it is a real
// interruption (the agent stops) or a backchannel or noise (the voice comes back to
// full volume, and the agent never stopped). What the sound was is remembered for its
// transcript, which becomes a backchannel in the history, not a user turn: that
// bookkeeping is backchannels'.

// backchannels keeps what the sounds over the agent that did not interrupt it were,
// until their transcripts say what the history keeps of them.
type backchannels struct {
	cfg BargeInConfig
	lex *lexicon

	// verdict is what the sounds over the agent since the last transcript were, when
	// they did not interrupt it, for the transcript that follows (one transcript may
	// span several sounds); pending backchannels wait for their agent turn to be stored.
	verdict *verdict
	pending []*Backchannel
	// settled is the last voice over the agent that did not interrupt it (nil: none, or
	// a sound began since); piece the last transcript of one kept as a backchannel for
	// want of words (nil: none, or a transcript came since).
	settled *settledVoice
	piece   *piece
	// carried is the transcript of such a piece when the voice that went on with it
	// interrupted the agent: it opens the user's turn.
	carried *Utterance
}

// verdict is what a sound over the agent turned out to be when it did not interrupt,
// kept for its transcript.
type verdict struct {
	agentTurn int
	kind      SoundKind
	words     []ScoredWord // the evidence's last decode
	noise     bool
}

// settledVoice is a voice over the agent that did not interrupt it, for a sound that
// follows it closely to go on with (rejoin).
type settledVoice struct {
	agentTurn int
	from, end time.Time
	comebacks int
}

// piece is a voice over the agent whose transcript holds a real word, kept as a
// backchannel (HumText, or the backchannel words heard) for want of more: the first
// piece of speech an echo canceller cut in two, or of a hesitant speaker's, should the
// next utterance follow within Evidence.Rejoin ("go forward ten meters" over a young
// canceller: "we're in for" and, 650 ms later, "risk", or "for sure" and "ten meters";
// "turn… off…": "turn", decoded "sure", and 580 ms later "off").
type piece struct {
	agentTurn int
	u         *Utterance
	bc        *Backchannel
}

// rejoin reports whether a sound over agent turn agentTurn that began at onset goes on
// with the voice that settled last (within Evidence.Rejoin of its end), and that voice's
// start and comebacks. An echo canceller cuts speech over the agent into pieces ("go
// forward ten meters" as "go for…" and "…ten meters", 230 ms apart), each of them too
// short, and too garbled, to interrupt alone. A new sound forgets the settled voice.
func (k *backchannels) rejoin(agentTurn int, onset time.Time) (from time.Time, comebacks int, ok bool) {
	p := k.settled
	k.settled = nil
	if p == nil || agentTurn == 0 || p.agentTurn != agentTurn || onset.After(p.end.Add(k.cfg.Evidence.Rejoin)) {
		return time.Time{}, 0, false
	}
	return p.from, p.comebacks, true
}

// settle keeps what barge-in b over agent turn agentTurn was, which the evidence found
// no interruption: for its transcript, and (a voice that ended) for a voice that follows
// it closely.
func (k *backchannels) settle(agentTurn int, b *bargeIn) {
	s := b.sound
	v := &verdict{agentTurn: agentTurn, kind: s.Kind, words: s.Words,
		noise: s.Kind == SoundNoise || s.Kind == SoundUnknown}
	if p := k.verdict; p != nil && p.agentTurn == v.agentTurn {
		// The utterance these sounds belong to is one transcript: a voice in any of them
		// makes it no noise ("go for…" and a "…meters" the canceller left as a noise).
		v.kind, v.noise = max(p.kind, v.kind), p.noise && v.noise
		v.words = append(slices.Clip(p.words), v.words...)
	}
	k.verdict, k.settled = v, nil
	if s.Kind == SoundVoice && s.Ended {
		k.keepVoice(agentTurn, b.from, s.End, b.comebacks)
	}
}

// keepVoice keeps a voice over agent turn agentTurn, from from to end, that did not
// interrupt it, for a sound that follows it closely (rejoin).
func (k *backchannels) keepVoice(agentTurn int, from, end time.Time, comebacks int) {
	k.settled = &settledVoice{agentTurn: agentTurn, from: from, end: end, comebacks: comebacks}
}

// interrupted notes that barge-in b interrupted agent turn agentTurn: its utterance is a
// turn, whatever its sounds before were; and a piece kept as a backchannel that it went
// on with is speech, and opens the user's turn.
func (k *backchannels) interrupted(agentTurn int, b *bargeIn) {
	k.verdict = nil
	if p := k.piece; p != nil && p.agentTurn == agentTurn && b.from.Before(b.onset) && k.unpend(p.bc) {
		k.carried = p.u
	}
	k.piece = nil
}

// forget drops the verdict: the transcript it waited for was nothing.
func (k *backchannels) forget() { k.verdict = nil }

// takeCarried returns the piece that opens the user's turn (nil: none), and forgets it.
func (k *backchannels) takeCarried() *Utterance {
	c := k.carried
	k.carried = nil
	return c
}

// classify decides whether the user's utterance is a backchannel: it is when the
// evidence found its sound no interruption (unless the transcript of a voice holds two
// different confident real words, or two different real words at all after a voice
// longer than MaxBackchannel: then it is a turn of its own, after the agent's), or,
// without evidence, when it overlapped the agent (overlap) and holds only backchannels.
// agent is the agent turn under way (nil: none). It returns the backchannel to store
// (without text for noise: nothing is stored) and whether the utterance is no turn;
// when the utterance is a turn together with the voice over the agent just before it
// (see piece), joined is the two as one utterance, and that voice is no backchannel any
// more.
func (k *backchannels) classify(u *Utterance, overlap bool, agent *agentTurn) (bc *Backchannel, ok bool, joined *Utterance) {
	v := k.verdict
	k.verdict = nil
	prev := k.piece
	k.piece = nil
	text := strings.TrimSpace(u.Text)
	if v == nil {
		if overlap && agent != nil && !agent.interrupted && k.lex.onlyBackchannels(strings.Fields(text)) {
			return &Backchannel{TurnID: agent.id, Text: text, Sound: SoundVoice, Start: u.Start, End: u.End}, true, nil
		}
		return nil, false, nil
	}
	lex := k.lex
	words := lex.transcriptWords(u)
	speech := v.kind == SoundVoice && lex.transcriptIsSpeech(words, u.End-u.Start)
	// A piece just before goes with it when the two are speech, also when this one is
	// speech alone: its words were the start of the turn.
	if prev != nil && prev.agentTurn == v.agentTurn && u.Start-prev.u.End <= k.cfg.Evidence.Rejoin &&
		len(words.real) > 0 && (speech || lex.transcriptIsSpeech(lex.transcriptWords(prev.u, u), u.End-prev.u.Start)) &&
		k.unpend(prev.bc) {
		return nil, false, joinUtterances(prev.u, u)
	}
	if speech {
		return nil, false, nil
	}
	backs := words.backs
	if len(backs) == 0 {
		backs = lex.backchannelWords(v.words)
	}
	bc = &Backchannel{TurnID: v.agentTurn, Text: strings.Join(backs, " "), Sound: v.kind, Start: u.Start, End: u.End}
	if bc.Text == "" && !v.noise {
		bc.Text = k.cfg.HumText
	}
	if v.kind == SoundVoice && len(words.real) > 0 {
		// Kept as a backchannel for want of words, for the overlap module's guess at one
		// ("sure" for festival kal's "turn…", which the recogniser heard), or for one
		// beside a real word ("for sure", the first piece of "go forward ten meters"
		// through a young canceller).
		k.piece = &piece{agentTurn: v.agentTurn, u: u, bc: bc}
	}
	return bc, true, nil // a cough, a knock: no text, nothing to keep
}

// joinUtterances returns a and b, which follows it, as one utterance.
func joinUtterances(a, b *Utterance) *Utterance {
	return &Utterance{Text: strings.TrimSpace(strings.TrimSpace(a.Text) + " " + strings.TrimSpace(b.Text)),
		Words: append(slices.Clip(a.Words), b.Words...), Start: a.Start, End: b.End}
}

// record keeps a backchannel for after the agent turn it accompanied: it waits while
// that turn is under way (agentTurn), and is returned to be stored at once otherwise. A
// noise (no text) is stored nowhere; it is returned at once, only to say so.
func (k *backchannels) record(bc *Backchannel, agentTurn int) *Backchannel {
	if bc == nil {
		return nil
	}
	if agentTurn != 0 && agentTurn == bc.TurnID && bc.Text != "" {
		k.pending = append(k.pending, bc)
		return nil
	}
	return bc
}

// unpend takes bc back from the backchannels waiting for their agent turn to close, and
// reports whether it was still waiting (not stored yet).
func (k *backchannels) unpend(bc *Backchannel) bool {
	i := slices.Index(k.pending, bc)
	if i < 0 {
		return false
	}
	k.pending = slices.Delete(k.pending, i, i+1)
	return true
}

// flush returns the backchannels that waited for their agent turn to close, to be
// stored now.
func (k *backchannels) flush() []*Backchannel {
	out := k.pending
	k.pending = nil
	return out
}
