package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/dialogue"
	"go.uber.org/zap"
)

// Soft barge-ins: at the first sound of the user the agent's voice is ducked, not
// stopped (hold in bargein.go), and the overlap module's evidence about the sound —
// decodes of it every few tens of milliseconds, its acoustics, its length — decides
// early whether it is a real interruption (the agent stops) or a backchannel or noise
// (the voice comes back to full volume, and the agent never stopped). What the sound
// was is remembered for its transcript, which becomes a backchannel in the history,
// not a user turn.

// SoundKind is the overlap module's acoustic judgement of a sound.
type SoundKind uint8

const (
	SoundUnknown SoundKind = iota
	// SoundNoise: not a voice (a cough, a knock, a rustle).
	SoundNoise
	// SoundHum: a voice with the mouth closed ("mm-hmm", "hmm").
	SoundHum
	// SoundVoice: a voice, speech.
	SoundVoice
)

func (k SoundKind) String() string {
	switch k {
	case SoundNoise:
		return "noise"
	case SoundHum:
		return "hum"
	case SoundVoice:
		return "voice"
	}
	return "unknown"
}

// ScoredWord is a recognised word with the recogniser's confidence (0–1; 0: none given).
type ScoredWord struct {
	Text       string
	Confidence float32
}

// OverlapSound is the overlap module's evidence so far about a sound the user makes
// while the agent is audible (see package overlap).
type OverlapSound struct {
	// Onset is when the sound began (clock time).
	Onset time.Time
	Kind  SoundKind
	// Words is the latest decode of the sound; DecodedTo how much of the sound it covered
	// and Decodes how many decodes there were (a new number: a new decode).
	Words     []ScoredWord
	DecodedTo time.Duration
	Decodes   int
	// Ended: the sound has stopped (at End); it may start again until Final.
	Ended bool
	End   time.Time
	// Dropped: the VAD withdrew it as too short to be speech.
	Dropped bool
	// Final: the module's last word on the sound.
	Final bool
}

// Duck lowers the agent's voice of turn TurnID to Gain dB while a barge-in is weighed.
type Duck struct {
	TurnID int
	Gain   float64
	Reason string
}

// AppendBackchannel stores a backchannel the user gave during agent turn TurnID: it
// follows that turn in the history. Without Text it stores nothing: the utterance was
// noise over the agent (a cough the recogniser gave a word to), and is no turn either.
type AppendBackchannel struct {
	TurnID int
	Text   string
	Sound  SoundKind
	// Start and End span the user's sound on the session's timeline.
	Start, End time.Duration
}

// verdict is what a sound over the agent turned out to be when it did not interrupt,
// kept for its transcript.
type verdict struct {
	agentTurn int
	kind      SoundKind
	words     []ScoredWord // the evidence's last decode
	noise     bool
}

// handleSound takes the overlap module's evidence.
func (t *Turns) handleSound(ev Event, acts []Action) []Action {
	s := ev.Sound
	b := t.barge
	if b == nil {
		if !t.agentActive() || !t.cfg.BargeIn.Enabled || s.Final || s.Dropped || s.Ended {
			return acts
		}
		// Evidence of a sound the VAD's candidate did not announce here (the agent
		// became audible in between): a barge-in all the same.
		t.beginBargeIn(s.Onset, true)
		b = t.barge
		acts = t.hold(acts, "user sound over the agent")
	}
	if b.resolved {
		return acts
	}
	if b.sound != nil && s.Decodes != b.sound.Decodes {
		b.prev2, b.prev = b.prev, b.sound.Words
	}
	if b.sound != nil && b.sound.Ended && !s.Ended && !s.Final {
		b.comebacks++
	}
	b.sound = s
	return t.evaluateBargeIn(ev.At, acts)
}

// weighSound applies the evidence rules (EvidenceConfig) to the barge-in's sound.
func (t *Turns) weighSound(now time.Time, acts []Action) []Action {
	b := t.barge
	s := b.sound
	cfg := t.cfg.BargeIn
	if s.Dropped {
		return t.settleSound(acts, "noise, not speech")
	}
	if cfg.MaxBackchannel > 0 && !now.Before(b.from.Add(cfg.MaxBackchannel)) {
		b.longChecked = true
	}
	if reason := t.interruption(now); reason != "" {
		return t.interrupt(acts, reason)
	}
	switch {
	case s.Final:
		return t.settleSound(acts, "backchannel or noise")
	case s.Ended:
		return t.release(acts, "the sound ended")
	case t.backchannelHeard(s, b.prev):
		return t.release(acts, "a backchannel")
	case s.Kind == SoundNoise || s.Kind == SoundUnknown:
		return acts
	}
	// The sound goes on (again): soft again.
	return t.hold(acts, "the sound goes on")
}

// voiceComebacks is how often a voice over the agent must go on again after a pause,
// past MaxBackchannel, to interrupt however little its decodes agree: a single
// backchannel comes back at most once ("uh… huh"), and repeated ones ("yeah, yeah,
// yeah") are told by their words.
const voiceComebacks = 2

// interruption returns why the sound is a real interruption, or "".
func (t *Turns) interruption(now time.Time) string {
	b := t.barge
	s := b.sound
	cfg := t.cfg.BargeIn
	ev := cfg.Evidence
	if s.Kind != SoundVoice && s.Kind != SoundHum {
		return "" // not a voice (yet): "stop" begins unvoiced, and its vowel decides
	}
	switch {
	case s.DecodedTo >= ev.KeywordSound && t.hasInterruptWord(s.Words, ev.KeywordConfidence):
		return "barge-in: an interrupt word"
	case t.repeatedInterrupt(s.Words, b.prev):
		return "barge-in: interrupt words in two decodes"
	case t.endsInInterrupt(s.Words, b.prev, b.prev2):
		return "barge-in: three decodes end in an interrupt word"
	}
	// Words (other than interrupt words) count once three decodes in a row agree on them,
	// from the first on: a long hum decodes into a drift of short words, some of them
	// confident, after a doubtful start.
	stable := t.confidentLead(s.Words, b.prev, b.prev2)
	switch {
	case stable >= 2:
		return "barge-in: confident words"
	case s.Kind == SoundVoice && b.longChecked && !s.Ended && stable >= 1:
		return "barge-in: too long for a backchannel"
	case s.Kind == SoundVoice && b.longChecked && !s.Ended && b.comebacks >= voiceComebacks &&
		t.wordsBesideBackchannels(s.Words) > b.comebacks:
		// Someone who talks in phrases over the agent ("turn… off… the light…"): the
		// decodes of speech cut by pauses drift, and need not agree on any word. A
		// listener who repeats a backchannel ("okay, okay, right") comes back too, and
		// its decodes hold its words, with a guess or two at the phrase being heard: a
		// word beside the backchannels for each phrase tells speech.
		return "barge-in: the voice keeps coming back"
	}
	return ""
}

// settleSound ends a barge-in that was no interruption: the voice comes back, and what
// the sound was is kept for its transcript.
func (t *Turns) settleSound(acts []Action, reason string) []Action {
	b := t.barge
	s := b.sound
	if s.Dropped {
		// The VAD withdrew it: no transcript comes for it to judge, and a verdict kept
		// would judge the next one, perhaps the user's turn after the agent's.
		return t.resume(acts, reason)
	}
	v := &verdict{agentTurn: t.agent.id, kind: s.Kind, words: s.Words,
		noise: s.Kind == SoundNoise || s.Kind == SoundUnknown}
	if p := t.verdict; p != nil && p.agentTurn == v.agentTurn {
		// The utterance these sounds belong to is one transcript: a voice in any of them
		// makes it no noise ("go for…" and a "…meters" the canceller left as a noise).
		v.kind, v.noise = max(p.kind, v.kind), p.noise && v.noise
		v.words = append(slices.Clip(p.words), v.words...)
	}
	var settled *settledVoice
	if s.Kind == SoundVoice && s.Ended {
		settled = &settledVoice{agentTurn: t.agent.id, from: b.from, end: s.End, comebacks: b.comebacks}
	}
	acts = t.resume(acts, reason)
	t.verdict, t.settled = v, settled
	return acts
}

// settledVoice is a voice over the agent that did not interrupt it, for a sound that
// follows it closely to go on with (beginBargeIn).
type settledVoice struct {
	agentTurn int
	from, end time.Time
	comebacks int
}

// hasInterruptWord reports whether words open with an interrupt word or phrase ("stop",
// "hold on") whose words are each at least minConf confident (openingInterrupt).
func (t *Turns) hasInterruptWord(words []ScoredWord, minConf float32) bool {
	first, conf := t.openingInterrupt(words)
	return first != "" && conf >= minConf
}

// openingInterrupt returns the first word of the interrupt word or phrase that words
// open with ("" if none) and the least confidence among its words: an interruption
// begins with it ("wait, …", "no, I meant …"), or follows a confident backchannel
// ("yeah, but wait"). An interrupt word after other words is more likely a decode's
// guess at a hum or a mumble; a phrase, two words agreeing, may follow one word the
// decode doubts (below DoubtConfidence: its guess at a breath or the start of the
// phrase).
func (t *Turns) openingInterrupt(words []ScoredWord) (first string, conf float32) {
	ev := t.cfg.BargeIn.Evidence
	doubted := false
	for i, w := range words {
		if n := t.interruptAt(words[i:]); n > 1 || n == 1 && !doubted {
			least := w.Confidence
			for _, pw := range words[i+1 : i+n] {
				least = min(least, pw.Confidence)
			}
			return normalizeWord(w.Text), least
		}
		switch {
		case t.backWords[normalizeWord(w.Text)] && w.Confidence >= ev.BackchannelConfidence:
		case w.Confidence < ev.DoubtConfidence && !doubted:
			doubted = true
		default:
			return "", 0
		}
	}
	return "", 0
}

// repeatedInterrupt reports whether two decodes in a row open with the same interrupt
// word (or phrases that begin alike: "hold", then "hold on"), one of them giving it at
// least RepeatConfidence. Two different ones are guesses at the start of a word: flite
// awb's "right" decoded "how(1.00)", then "stop(1.00)", on the real clock.
func (t *Turns) repeatedInterrupt(cur, prev []ScoredWord) bool {
	first, conf := t.openingInterrupt(cur)
	firstBefore, confBefore := t.openingInterrupt(prev)
	return first != "" && first == firstBefore && max(conf, confBefore) >= t.cfg.BargeIn.Evidence.RepeatConfidence
}

// endsInInterrupt reports whether three decodes in a row end in the same interrupt word
// or phrase, each of its words at least WordConfidence confident in each. Over an echo
// canceller's linear output the residue of the agent's voice garbles the start of an
// interruption ("wait, stop" decodes as "you(0.24) can't(0.30) stop(0.85)"), so the
// interrupt word cannot open the decode; a hum's drift of guesses does not end in the
// same confident word three times.
func (t *Turns) endsInInterrupt(decodes ...[]ScoredWord) bool {
	minConf := t.cfg.BargeIn.Evidence.WordConfidence
	phrase := ""
	for _, words := range decodes {
		p := t.trailingInterrupt(words, minConf)
		if p == "" || phrase != "" && p != phrase {
			return false
		}
		// After backchannel words the interrupt word is more likely the start of the
		// next backchannel ("okay(0.50) no(1.00)" as "okay, okay" goes on).
		for _, w := range words[:len(words)-len(strings.Fields(p))] {
			if t.backWords[normalizeWord(w.Text)] {
				return false
			}
		}
		phrase = p
	}
	return phrase != ""
}

// trailingInterrupt returns the longest interrupt phrase (or word) that ends words with
// each of its words at least minConf confident, "" if none does.
func (t *Turns) trailingInterrupt(words []ScoredWord, minConf float32) string {
	for n := min(len(words), t.longestInterrupt); n > 0; n-- {
		tail := words[len(words)-n:]
		parts := make([]string, n)
		sure := true
		for i, w := range tail {
			parts[i] = normalizeWord(w.Text)
			sure = sure && w.Confidence >= minConf
		}
		if p := strings.Join(parts, " "); t.interrupts[p] && sure {
			return p
		}
	}
	return ""
}

// interruptAt returns the length in words of the longest interrupt phrase (or word)
// that opens words, 0 if none does.
func (t *Turns) interruptAt(words []ScoredWord) int {
	for n := min(len(words), t.longestInterrupt); n > 0; n-- {
		parts := make([]string, n)
		for i, w := range words[:n] {
			parts[i] = normalizeWord(w.Text)
		}
		if t.interrupts[strings.Join(parts, " ")] {
			return n
		}
	}
	return 0
}

// confidentLead counts the real words (not part of any backchannel) that open the
// decodes cur, prev and prev2 alike, each at least WordConfidence confident in two of
// the three, or in one of them with none of the three below TurnWordConfidence:
// counting stops at the first word that is neither such a word nor a confident
// backchannel. Not the latest decode alone: a word's confidence sinks as the decodes
// take in more of what follows it ("go" 0.95, 0.85, 0.75 as "forward" comes), and on a
// loaded machine decodes come further apart, so that two of three may see the dip
// ("go" 0.85, 0.68, 0.69 in a live run with both cores busy). A hum's drift of words
// agrees on none of them for long, and doubts them (0.3–0.4).
func (t *Turns) confidentLead(cur, prev, prev2 []ScoredWord) int {
	ev := t.cfg.BargeIn.Evidence
	n := 0
	for i := 0; i < len(cur) && i < len(prev) && i < len(prev2); i++ {
		w := normalizeWord(cur[i].Text)
		if w != normalizeWord(prev[i].Text) || w != normalizeWord(prev2[i].Text) {
			break
		}
		confident, doubted := 0, false
		for _, c := range []float32{cur[i].Confidence, prev[i].Confidence, prev2[i].Confidence} {
			if c >= ev.WordConfidence {
				confident++
			}
			doubted = doubted || c < ev.TurnWordConfidence
		}
		switch {
		case t.backWords[w] && cur[i].Confidence >= ev.BackchannelConfidence:
		case !t.backWords[w] && lexical(w) && (confident >= 2 || confident == 1 && !doubted):
			n++
		default:
			return n
		}
	}
	return n
}

// stableRealWords counts the real words (not part of any backchannel) at least minConf
// confident that two decodes in a row agree on (their common prefix).
func (t *Turns) stableRealWords(cur, prev []ScoredWord, minConf float32) int {
	n := 0
	for i := 0; i < len(cur) && i < len(prev); i++ {
		w := normalizeWord(cur[i].Text)
		if w != normalizeWord(prev[i].Text) {
			break
		}
		if !t.backWords[w] && cur[i].Confidence >= minConf {
			n++
		}
	}
	return n
}

// backchannelHeard reports whether the evidence already says backchannel: two decodes
// in a row with the same words, all of them backchannel words at least
// BackchannelConfidence confident; or a hum with no word that would interrupt.
func (t *Turns) backchannelHeard(s *OverlapSound, prev []ScoredWord) bool {
	ev := t.cfg.BargeIn.Evidence
	if s.Kind == SoundHum && s.DecodedTo >= ev.KeywordSound && !t.hasInterruptWord(s.Words, 0) &&
		t.stableRealWords(s.Words, prev, ev.WordConfidence) == 0 {
		return true
	}
	if len(s.Words) == 0 || prev == nil || !sameScored(s.Words, prev) {
		return false
	}
	texts := make([]string, len(s.Words))
	whole := true // every word a backchannel of its own
	for i, w := range s.Words {
		texts[i] = normalizeWord(w.Text)
		if !t.backWords[texts[i]] || w.Confidence < ev.BackchannelConfidence {
			return false
		}
		whole = whole && t.backs[texts[i]]
	}
	// "i" alone is only the start of "i see".
	if !whole && !t.backs[strings.Join(texts, " ")] {
		return false
	}
	return s.Kind == SoundVoice || s.Kind == SoundHum
}

// wordsBesideBackchannels counts the words of a decode that are neither part of a
// backchannel nor single letters, however confident.
func (t *Turns) wordsBesideBackchannels(words []ScoredWord) int {
	n := 0
	for _, w := range words {
		if nw := normalizeWord(w.Text); !t.backWords[nw] && lexical(nw) {
			n++
		}
	}
	return n
}

// lexical reports whether a recognised word can be a real word: recognisers render hums
// as strings of letters ("m m h m m").
func lexical(w string) bool { return len([]rune(w)) > 1 || w == "a" || w == "i" }

func sameScored(a, b []ScoredWord) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if normalizeWord(a[i].Text) != normalizeWord(b[i].Text) {
			return false
		}
	}
	return true
}

// backchannelOf decides whether the user's utterance is a backchannel: it is when the
// evidence found its sound no interruption (unless the transcript of a voice holds two
// different confident real words, or two different real words at all after a voice
// longer than MaxBackchannel: then it is a turn of its own, after the agent's), or,
// without evidence,
// when it overlapped the agent and holds only backchannels. It returns the text to store
// (empty for noise: nothing is stored) and whether the utterance is no turn; when the
// utterance is a turn together with the voice over the agent just before it (see
// piece), joined is the two as one utterance, and that voice is no backchannel any more.
func (t *Turns) backchannelOf(u *Utterance, overlap bool) (bc *AppendBackchannel, ok bool, joined *Utterance) {
	v := t.verdict
	t.verdict = nil
	prev := t.piece
	t.piece = nil
	text := strings.TrimSpace(u.Text)
	if v == nil {
		if overlap && t.agent != nil && !t.agent.interrupted && t.onlyBackchannels(strings.Fields(text)) {
			return &AppendBackchannel{TurnID: t.agent.id, Text: text, Sound: SoundVoice, Start: u.Start, End: u.End}, true, nil
		}
		return nil, false, nil
	}
	words := t.transcriptWords(u)
	speech := v.kind == SoundVoice && t.transcriptIsSpeech(words, u.End-u.Start)
	// A piece just before goes with it when the two are speech, also when this one is
	// speech alone: its words were the start of the turn.
	if prev != nil && prev.agentTurn == v.agentTurn && u.Start-prev.u.End <= t.cfg.BargeIn.Evidence.Rejoin &&
		len(words.real) > 0 && (speech || t.transcriptIsSpeech(t.transcriptWords(prev.u, u), u.End-prev.u.Start)) &&
		t.unpend(prev.bc) {
		return nil, false, joinUtterances(prev.u, u)
	}
	if speech {
		return nil, false, nil
	}
	backs := words.backs
	if len(backs) == 0 {
		for _, w := range v.words {
			if nw := normalizeWord(w.Text); t.backWords[nw] {
				backs = append(backs, nw)
			}
		}
	}
	bc = &AppendBackchannel{TurnID: v.agentTurn, Text: strings.Join(backs, " "), Sound: v.kind, Start: u.Start, End: u.End}
	if bc.Text == "" && !v.noise {
		bc.Text = t.cfg.BargeIn.HumText
	}
	if v.kind == SoundVoice && len(words.real) > 0 {
		// Kept as a backchannel for want of words, for the overlap module's guess at one
		// ("sure" for festival kal's "turn…", which the recogniser heard), or for one
		// beside a real word ("for sure", the first piece of "go forward ten meters"
		// through a young canceller).
		t.piece = &piece{agentTurn: v.agentTurn, u: u, bc: bc}
	}
	return bc, true, nil // a cough, a knock: no text, nothing to keep
}

// joinUtterances returns a and b, which follows it, as one utterance.
func joinUtterances(a, b *Utterance) *Utterance {
	return &Utterance{Text: strings.TrimSpace(strings.TrimSpace(a.Text) + " " + strings.TrimSpace(b.Text)),
		Words: append(slices.Clip(a.Words), b.Words...), Start: a.Start, End: b.End}
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
	bc        *AppendBackchannel
}

// heardWords sorts a transcript's words: real, the different real words, sure, those of
// them of more than one letter at least once confident, and backs, its backchannel
// words. A one-letter word is no sure sign of speech however confident: it is what a
// recogniser makes of a hum's open vowel (flite rms's "hmm" as "a(0.86) champ(0.62)" in
// one of four replays on the real clock, "they(0.19) chairman(0.38)" in the others).
type heardWords struct {
	real, sure map[string]bool
	backs      []string
}

func (t *Turns) transcriptWords(us ...*Utterance) heardWords {
	ev := t.cfg.BargeIn.Evidence
	h := heardWords{real: map[string]bool{}, sure: map[string]bool{}}
	for _, u := range us {
		for _, w := range u.Words {
			nw := normalizeWord(w.Text)
			switch {
			case nw == "":
			case t.backWords[nw]:
				h.backs = append(h.backs, nw)
			case lexical(nw):
				h.real[nw] = true
				if w.Confidence >= ev.TurnWordConfidence && len([]rune(nw)) > 1 {
					h.sure[nw] = true
				}
			}
		}
	}
	return h
}

// transcriptIsSpeech reports whether the transcript of a voice that did not interrupt is
// speech, a turn of its own: two different sure real words (heardWords), or, in a voice
// longer than any backchannel, two different real words however unsure. The latter is
// speech the recogniser heard badly (through the residue of the agent's voice or an echo
// canceller's cuts: "go forward ten meters" as "for over ten meters by", every word
// doubted), not a hum, whose transcripts are letters ("n m h m m") or one word repeated.
// Through an echo canceller's linear output a long hum's transcript can be words too
// ("can the major them for"), and it becomes a turn: a floor on the words' confidence
// lost real speech instead (docs/MEASUREMENTS.md).
func (t *Turns) transcriptIsSpeech(h heardWords, length time.Duration) bool {
	long := t.cfg.BargeIn.MaxBackchannel > 0 && length >= t.cfg.BargeIn.MaxBackchannel
	return len(h.sure) >= 2 || long && len(h.real) >= 2
}

// recordBackchannel stores a backchannel after the agent turn it accompanied: at once
// when that turn is closed, otherwise when it closes. A noise (no text) is stored
// nowhere; the action only says so at once.
func (t *Turns) recordBackchannel(bc *AppendBackchannel, acts []Action) []Action {
	if bc == nil {
		return acts
	}
	if a := t.agent; a != nil && a.id == bc.TurnID && bc.Text != "" {
		t.pendingBackchannels = append(t.pendingBackchannels, bc)
		return acts
	}
	return append(acts, Action{AppendBackchannel: bc})
}

// unpend takes bc back from the backchannels waiting for their agent turn to close, and
// reports whether it was still waiting (not stored yet).
func (t *Turns) unpend(bc *AppendBackchannel) bool {
	i := slices.Index(t.pendingBackchannels, bc)
	if i < 0 {
		return false
	}
	t.pendingBackchannels = slices.Delete(t.pendingBackchannels, i, i+1)
	return true
}

// flushBackchannels stores the backchannels that waited for their agent turn to close.
func (t *Turns) flushBackchannels(acts []Action) []Action {
	for _, bc := range t.pendingBackchannels {
		acts = append(acts, Action{AppendBackchannel: bc})
	}
	t.pendingBackchannels = nil
	return acts
}

// UserTurn is the payload of the manager's user-turn IUs (kind "user-turn", ADD and
// COMMIT in one batch): the history stored a user utterance, as a turn or as a
// backchannel — or, for a backchannel without Text, a noise over the agent that nothing
// keeps. Every utterance with words ends in one. Consoles print it, so that they show
// what the history keeps.
type UserTurn struct {
	// TurnID is the user's turn, or for a backchannel the agent turn it accompanied.
	TurnID int
	Text   string
	// Backchannel: not a turn, an acknowledgement while the agent spoke; Sound says what
	// the overlap module heard (hum, voice).
	Backchannel bool
	Sound       SoundKind
	// Start and End span the user's speech on the session's timeline.
	Start, End time.Duration
}

// Kind implements iu.Payload.
func (UserTurn) Kind() string { return "user-turn" }

// Summary implements iu.Payload.
func (u UserTurn) Summary() string {
	if u.Backchannel && u.Text == "" {
		return fmt.Sprintf("noise (%s) during turn %d, not stored", u.Sound, u.TurnID)
	}
	if u.Backchannel {
		return fmt.Sprintf("backchannel %q (%s) during turn %d", u.Text, u.Sound, u.TurnID)
	}
	return fmt.Sprintf("user turn %d %q", u.TurnID, u.Text)
}

// backchannel stores a backchannel and tells the network (a noise only the latter).
func (c *conversation) backchannel(ctx context.Context, bc *AppendBackchannel) error {
	if bc.Text == "" {
		c.log.Info("noise over the agent, not stored", zap.Int("agent_turn", bc.TurnID), zap.Stringer("sound", bc.Sound))
		return c.send(ctx, UserTurn{TurnID: bc.TurnID, Backchannel: true, Sound: bc.Sound, Start: bc.Start, End: bc.End})
	}
	u := dialogue.Utterance{Speaker: dialogue.User, Text: bc.Text, TurnID: bc.TurnID, Backchannel: true}
	if err := c.m.store.AppendUtterance(ctx, u); err != nil {
		return fmt.Errorf("manager: storing a backchannel during turn %d: %w", bc.TurnID, err)
	}
	c.m.transcript = append(c.m.transcript, Entry{Speaker: dialogue.User, TurnID: bc.TurnID, Text: bc.Text, Backchannel: true, Start: bc.Start, End: bc.End})
	c.log.Info("backchannel", zap.Int("agent_turn", bc.TurnID), zap.String("text", bc.Text), zap.Stringer("sound", bc.Sound))
	return c.send(ctx, UserTurn{TurnID: bc.TurnID, Text: bc.Text, Backchannel: true, Sound: bc.Sound, Start: bc.Start, End: bc.End})
}
