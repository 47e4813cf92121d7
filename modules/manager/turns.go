// Package manager is the turn-taking dialogue manager: it follows user speech (VAD, ASR),
// the agent's reply (LLM, TTS) and what the listener hears (speaker), decides when the
// agent answers, pauses, resumes or is interrupted, and keeps the dialogue history true
// to what was said and heard.
//
// The decisions live in Turns, a clock-free state machine: events in, actions out. The
// Module adapts IUs to events and actions to IUs and history operations, so the policy
// can be tested on scripted event sequences.
package manager

import (
	"strings"
	"time"
	"unicode"
)

// State is the conversation state the issue names.
type State uint8

// Conversation states.
const (
	Idle              State = iota // nobody has spoken yet, or the agent is waiting for input
	UserSpeaking                   // the user speaks and the agent is silent
	SilenceAfterUser               // the user stopped; the agent is deciding or preparing a reply
	AgentSpeaking                  // the listener hears the agent
	SilenceAfterAgent              // the agent finished its turn
	Overlap                        // the user speaks while the agent's turn is under way
)

var stateNames = [...]string{"idle", "user speaking", "silence after user", "agent speaking", "silence after agent", "overlap"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state?"
}

// BargeInConfig says what counts as a real interruption.
type BargeInConfig struct {
	// Enabled lets the user interrupt the agent at all.
	Enabled bool `yaml:"enabled"`
	// MinDuration is how long the user must speak over the agent (default 250 ms).
	MinDuration time.Duration `yaml:"min_duration"`
	// MinWords is how many recognised words that are not backchannels the user must say;
	// 0 decides on duration alone.
	MinWords int `yaml:"min_words"`
	// Backchannels never interrupt ("mm-hmm", "yeah", ...); compared case- and
	// punctuation-insensitively.
	Backchannels []string `yaml:"backchannels"`
	// MaxBackchannel: speech over the agent that lasts longer than this interrupts
	// whatever the recogniser made of it (nobody backchannels for that long); 0 turns
	// the rule off.
	MaxBackchannel time.Duration `yaml:"max_backchannel"`
	// MinStability is the stability a partial word needs to count (1: only words local
	// agreement confirmed). Final words always count.
	MinStability float32 `yaml:"min_stability"`
	// EarlyWords is how many real words partial hypotheses must hold to decide a
	// barge-in before the final transcript (0: never decide on partials). A single
	// partial word is not trusted: recognisers revise short words ("yet" → "yeah"), and
	// the agent's audio is paused meanwhile anyway.
	EarlyWords int `yaml:"early_words"`
	// Grace is how long after the user stopped the manager waits for the final
	// transcript before it decides the barge-in was false and resumes playback. It must
	// cover the end-of-turn silence plus the recogniser's final decode.
	Grace time.Duration `yaml:"grace"`
}

// ReengageConfig makes the agent speak up after a long silence (off when After is 0).
type ReengageConfig struct {
	After time.Duration `yaml:"after"`
	// Text is what the agent says; empty asks the LLM for a turn instead.
	Text string `yaml:"text"`
	// Max is how many times in a row the agent re-engages without an answer (default 1).
	Max int `yaml:"max"`
}

// Config configures the turn-taking policy.
type Config struct {
	BargeIn  BargeInConfig  `yaml:"barge_in"`
	Reengage ReengageConfig `yaml:"reengage"`
}

// DefaultConfig returns the defaults: barge-in after 250 ms and one real word, the usual
// backchannels, no re-engagement.
func DefaultConfig() Config {
	return Config{
		BargeIn: BargeInConfig{
			Enabled:        true,
			MinDuration:    250 * time.Millisecond,
			MinWords:       1,
			Backchannels:   []string{"mm-hmm", "mhm", "mm", "hmm", "uh-huh", "yeah", "yes", "okay", "ok", "right", "sure", "i see"},
			MaxBackchannel: time.Second,
			MinStability:   1,
			EarlyWords:     2,
			Grace:          2 * time.Second,
		},
	}
}

// Event is something the manager learns. Exactly one of the pointer fields is set.
type Event struct {
	At time.Time

	Candidate        *Candidate
	CandidateDropped *CandidateDropped
	SpeechStart      *SpeechStart
	SpeechEnd        *SpeechEnd
	EndOfTurn        *EndOfTurn
	Words            *Words
	Utterance        *Utterance
	Reply            *Reply
	Audio            *AudioHeard
	AudioQueued      *AudioQueued
}

// Candidate: the VAD heard what may be the start of user speech (before confirming it).
type Candidate struct {
	Onset time.Time
}

// CandidateDropped: the possible speech was noise.
type CandidateDropped struct{}

// SpeechStart: the VAD confirmed user speech; Onset is when it began (clock time).
type SpeechStart struct {
	Onset time.Time
}

// SpeechEnd: the user's speech segment ended at End (clock time).
type SpeechEnd struct {
	End time.Time
}

// EndOfTurn: the user's turn ended (silence long enough after speech).
type EndOfTurn struct {
	SpeechEnd time.Time
}

// Words is the ASR's current hypothesis for the utterance in progress.
type Words struct {
	Words []string
}

// Utterance is the user's final, committed utterance.
type Utterance struct {
	Text string
}

// Reply: the LLM finished (or stopped) generating agent turn TurnID.
type Reply struct {
	TurnID      int
	Text        string
	Interrupted bool
	Err         error
}

// AudioQueued: agent audio for TurnID exists (the TTS produced a chunk); Last marks the
// turn's final chunk.
type AudioQueued struct {
	TurnID int
	Last   bool
}

// AudioHeard is the speaker's progress: whether agent audio is audible, and for which turn.
type AudioHeard struct {
	TurnID  int
	Audible bool
	// Finished is set when the speaker heard the turn's last chunk to its end.
	Finished bool
	// Stopped is set on the speaker's final report after an interrupt.
	Stopped bool
}

// Action is something the manager wants done. Exactly one field is set.
type Action struct {
	Respond    *Respond
	Pause      *ControlTurn
	Resume     *ControlTurn
	Interrupt  *ControlTurn
	AppendUser *AppendUser
	// CloseAgent stores the agent turn: the whole reply, or (Interrupted) only what the
	// listener heard, which the Module computes from the speaker's record.
	CloseAgent *CloseAgent
	Say        *Say
	State      *StateChange
}

// Respond asks for agent turn TurnID.
type Respond struct {
	TurnID int
	Reason string
}

// ControlTurn names the agent turn a pause, resume or interrupt is about.
type ControlTurn struct {
	TurnID int
	Reason string
}

// AppendUser stores a user utterance as turn TurnID.
type AppendUser struct {
	TurnID int
	Text   string
}

// CloseAgent ends agent turn TurnID in the history.
type CloseAgent struct {
	TurnID      int
	Text        string // the whole generated reply
	Interrupted bool
}

// Say makes the agent speak a fixed text as turn TurnID (re-engagement).
type Say struct {
	TurnID int
	Text   string
}

// StateChange reports the new conversation state.
type StateChange struct {
	From, To State
	TurnID   int
}

// agentTurn is the agent turn under way.
type agentTurn struct {
	id          int
	replied     bool // the LLM's Reply arrived
	reply       Reply
	audioQueued bool // some audio was produced
	lastQueued  bool // the final chunk was produced
	audible     bool
	heardAny    bool
	finished    bool // the listener heard the last chunk to its end
	paused      bool
	interrupted bool
	stopped     bool // the speaker's final report after the interrupt arrived
}

// bargeIn is a barge-in under evaluation.
type bargeIn struct {
	onset      time.Time
	tentative  bool // begun by a candidate that the VAD has not confirmed yet
	open       bool // the user is still speaking
	ended      time.Time
	words      []string
	minReached bool // the speech lasted the minimum duration
	resolved   bool
}

// Turns is the turn-taking state machine. It is not safe for concurrent use: the
// manager module's goroutine owns it.
type Turns struct {
	cfg   Config
	backs map[string]bool

	state    State
	nextTurn int

	userSpeaking bool
	// overlapUtterance marks the utterance in progress as begun over the agent; if it
	// only holds backchannels it is not a turn.
	overlapUtterance bool

	agent *agentTurn
	barge *bargeIn
	// pendingUser holds a user utterance that arrived before the interrupted agent turn
	// was closed; it is stored right after, to keep the history in order.
	pendingUser *AppendUser

	lastActivity time.Time
	reengaged    int
	// agentSpokeLast tells, when nobody speaks, whether that silence follows the agent.
	agentSpokeLast bool
}

// NewTurns returns a state machine with cfg.
func NewTurns(cfg Config) *Turns {
	t := &Turns{cfg: cfg, backs: map[string]bool{}, nextTurn: 1}
	for _, b := range cfg.BargeIn.Backchannels {
		t.backs[normalizeWord(b)] = true
	}
	return t
}

// State returns the current conversation state.
func (t *Turns) State() State { return t.state }

// AgentTurn returns the agent turn under way (0 when none).
func (t *Turns) AgentTurn() int {
	if t.agent == nil {
		return 0
	}
	return t.agent.id
}

// Deadline returns when Tick must next be called (zero: no deadline).
func (t *Turns) Deadline() time.Time {
	var d time.Time
	if b := t.barge; b != nil && !b.resolved && t.agentActive() {
		d = t.bargeDeadline(b)
	}
	if r := t.cfg.Reengage; r.After > 0 && t.state == SilenceAfterAgent && t.agent == nil && t.reengaged < max(r.Max, 1) && !t.lastActivity.IsZero() {
		rd := t.lastActivity.Add(r.After)
		if d.IsZero() || rd.Before(d) {
			d = rd
		}
	}
	return d
}

// Tick lets deadlines take effect at time now.
func (t *Turns) Tick(now time.Time) []Action {
	var acts []Action
	if t.barge != nil && !t.barge.resolved {
		acts = t.evaluateBargeIn(now, acts)
	}
	if r := t.cfg.Reengage; r.After > 0 && t.state == SilenceAfterAgent && t.agent == nil &&
		t.reengaged < max(r.Max, 1) && !t.lastActivity.IsZero() && !now.Before(t.lastActivity.Add(r.After)) {
		t.reengaged++
		t.lastActivity = now
		id := t.newTurnID()
		if r.Text != "" {
			t.agent = &agentTurn{id: id, replied: true, reply: Reply{TurnID: id, Text: r.Text}}
			acts = append(acts, Action{Say: &Say{TurnID: id, Text: r.Text}})
		} else {
			t.agent = &agentTurn{id: id}
			acts = append(acts, Action{Respond: &Respond{TurnID: id, Reason: "re-engage after silence"}})
		}
		acts = t.setState(SilenceAfterUser, acts)
	}
	return acts
}

// bargeDeadline is when a barge-in under evaluation must be looked at again: when its
// minimum duration is reached, when it has become too long to be a backchannel, or when
// the wait for its transcript is over.
func (t *Turns) bargeDeadline(b *bargeIn) time.Time {
	cfg := t.cfg.BargeIn
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

func (t *Turns) newTurnID() int {
	id := t.nextTurn
	t.nextTurn++
	return id
}

// agentActive reports whether an agent turn is under way and not yet interrupted.
func (t *Turns) agentActive() bool { return t.agent != nil && !t.agent.interrupted }

// Handle applies one event and returns what to do.
func (t *Turns) Handle(ev Event) []Action {
	var acts []Action
	switch {
	case ev.Candidate != nil:
		if t.agentActive() && t.cfg.BargeIn.Enabled && t.barge == nil {
			// Hold the agent's voice at the first sound of the user; the candidate is
			// confirmed or withdrawn within the VAD's minimum speech duration.
			t.barge = &bargeIn{onset: ev.Candidate.Onset, open: true, tentative: true}
			t.agent.paused = true
			acts = append(acts, Action{Pause: &ControlTurn{TurnID: t.agent.id, Reason: "possible user speech"}})
		}
	case ev.CandidateDropped != nil:
		if b := t.barge; b != nil && b.tentative && !b.resolved && t.agent != nil {
			acts = t.resume(acts, "noise, not speech")
		}
	case ev.SpeechStart != nil && t.barge != nil && t.barge.tentative && !t.barge.resolved:
		// The candidate that paused the agent is confirmed speech.
		t.barge.tentative = false
		t.barge.onset = ev.SpeechStart.Onset
		t.userSpeaking = true
		t.lastActivity = ev.At
		t.overlapUtterance = true
		acts = t.setState(Overlap, acts)
		acts = t.evaluateBargeIn(ev.At, acts)
	case ev.SpeechStart != nil:
		t.userSpeaking = true
		t.lastActivity = ev.At
		if t.agentActive() && t.cfg.BargeIn.Enabled {
			// The agent is talking or about to: hold its audio while we find out whether
			// this is a real interruption (or the user simply going on with their turn).
			t.barge = &bargeIn{onset: ev.SpeechStart.Onset, open: true}
			t.overlapUtterance = true
			t.agent.paused = true
			acts = append(acts, Action{Pause: &ControlTurn{TurnID: t.agent.id, Reason: "user speech"}})
			acts = t.setState(Overlap, acts)
			acts = t.evaluateBargeIn(ev.At, acts)
		} else {
			t.overlapUtterance = t.agentActive()
			if t.agentActive() {
				acts = t.setState(Overlap, acts)
			} else {
				acts = t.setState(UserSpeaking, acts)
			}
		}
	case ev.SpeechEnd != nil:
		t.userSpeaking = false
		t.lastActivity = ev.At
		if b := t.barge; b != nil && !b.resolved {
			b.open = false
			b.ended = ev.SpeechEnd.End
			acts = t.evaluateBargeIn(ev.At, acts)
		}
		if t.state == UserSpeaking {
			acts = t.setState(SilenceAfterUser, acts)
		}
	case ev.Words != nil:
		if b := t.barge; b != nil && !b.resolved {
			b.words = ev.Words.Words
			acts = t.evaluateBargeIn(ev.At, acts)
		}
	case ev.EndOfTurn != nil:
		t.lastActivity = ev.At
	case ev.Utterance != nil:
		acts = t.handleUtterance(ev, acts)
	case ev.Reply != nil:
		if a := t.agent; a != nil && a.id == ev.Reply.TurnID {
			a.replied = true
			a.reply = *ev.Reply
			if !a.audioQueued && !a.interrupted && strings.TrimSpace(ev.Reply.Text) == "" {
				a.finished = true // nothing to say, nothing to hear
			}
			acts = t.maybeCloseAgent(acts)
		}
	case ev.AudioQueued != nil:
		if a := t.agent; a != nil && a.id == ev.AudioQueued.TurnID {
			a.audioQueued = true
			a.lastQueued = a.lastQueued || ev.AudioQueued.Last
		}
	case ev.Audio != nil:
		acts = t.handleAudio(ev, acts)
	}
	return acts
}

func (t *Turns) handleAudio(ev Event, acts []Action) []Action {
	h := ev.Audio
	a := t.agent
	if a == nil || a.id != h.TurnID {
		return acts
	}
	a.audible = h.Audible
	if h.Audible {
		a.heardAny = true
		t.lastActivity = ev.At
		if t.state != Overlap {
			acts = t.setState(AgentSpeaking, acts)
		}
	}
	if h.Finished {
		a.finished = true
		t.lastActivity = ev.At
	}
	if h.Stopped {
		a.stopped = true
	}
	return t.maybeCloseAgent(acts)
}

func (t *Turns) handleUtterance(ev Event, acts []Action) []Action {
	text := strings.TrimSpace(ev.Utterance.Text)
	overlap := t.overlapUtterance
	t.overlapUtterance = false
	t.lastActivity = ev.At
	acts = t.decideOnUtterance(strings.Fields(text), acts)
	if text == "" {
		// Noise: no turn. Fall back to what the agent is doing.
		return t.settle(acts)
	}
	if overlap && t.agent != nil && !t.agent.interrupted && t.onlyBackchannels(strings.Fields(text)) {
		// "mm-hmm" over the agent is not a turn; playback resumed (or will).
		return acts
	}
	t.reengaged = 0
	user := &AppendUser{TurnID: t.newTurnID(), Text: text}
	if t.agent != nil && t.agent.interrupted {
		// The interrupted turn must be closed (with what was heard) before the user's
		// words follow it in the history.
		t.pendingUser = user
		return t.maybeCloseAgent(acts)
	}
	if t.agent != nil {
		// The agent was still finishing a turn the user did not interrupt (e.g. its
		// last words were playing): close it first with everything it said.
		t.pendingUser = user
		return t.maybeCloseAgent(acts)
	}
	return t.startReply(user, acts)
}

func (t *Turns) startReply(user *AppendUser, acts []Action) []Action {
	acts = append(acts, Action{AppendUser: user})
	t.agentSpokeLast = false
	id := t.newTurnID()
	t.agent = &agentTurn{id: id}
	acts = append(acts, Action{Respond: &Respond{TurnID: id, Reason: "user turn ended"}})
	return t.setState(SilenceAfterUser, acts)
}

// maybeCloseAgent stores the agent turn once everything about it is known.
func (t *Turns) maybeCloseAgent(acts []Action) []Action {
	a := t.agent
	if a == nil {
		return acts
	}
	done := false
	switch {
	case a.interrupted:
		// The reply text and the speaker's final report are both needed to cut the turn.
		done = a.replied && (a.stopped || !a.heardAny)
	case t.pendingUser != nil:
		// The user spoke after the agent's turn without interrupting it.
		done = a.replied && (a.finished || !a.audioQueued)
	default:
		done = a.replied && a.finished && (a.lastQueued || !a.audioQueued)
	}
	if !done {
		return acts
	}
	t.agent = nil
	t.barge = nil
	// For an interrupted turn the Module keeps only what the listener heard (possibly
	// nothing, in which case the turn is not stored at all).
	acts = append(acts, Action{CloseAgent: &CloseAgent{TurnID: a.id, Text: a.reply.Text, Interrupted: a.interrupted}})
	t.agentSpokeLast = a.heardAny || !a.interrupted
	if u := t.pendingUser; u != nil {
		t.pendingUser = nil
		return t.startReply(u, acts)
	}
	return t.settle(acts)
}

// settle picks the state after a turn ended or an utterance turned out to be nothing.
func (t *Turns) settle(acts []Action) []Action {
	switch {
	case t.userSpeaking && t.agentActive():
		return t.setState(Overlap, acts)
	case t.userSpeaking:
		return t.setState(UserSpeaking, acts)
	case t.agentActive() && t.agent.audible:
		return t.setState(AgentSpeaking, acts)
	case t.agentActive():
		return t.setState(SilenceAfterUser, acts)
	case t.agentSpokeLast:
		return t.setState(SilenceAfterAgent, acts)
	default:
		return t.setState(Idle, acts)
	}
}

func (t *Turns) evaluateBargeIn(now time.Time, acts []Action) []Action {
	b := t.barge
	a := t.agent
	if b == nil || b.resolved {
		return acts
	}
	if a == nil || a.interrupted {
		b.resolved = true // nothing left to interrupt or resume
		return acts
	}
	if b.tentative {
		return acts // not speech yet
	}
	cfg := t.cfg.BargeIn
	end := now
	if !b.open {
		end = b.ended
	}
	dur := end.Sub(b.onset)
	b.minReached = b.minReached || dur >= cfg.MinDuration
	switch {
	case b.minReached && cfg.MinWords > 0 && cfg.EarlyWords > 0 && t.realWords(b.words) >= max(cfg.MinWords, cfg.EarlyWords),
		b.minReached && cfg.MinWords == 0,
		cfg.MaxBackchannel > 0 && dur >= cfg.MaxBackchannel:
		return t.interrupt(acts, "barge-in")
	case !b.open && !now.Before(b.ended.Add(cfg.Grace)):
		// The user stopped and no transcript came to say otherwise: a cough, noise.
		return t.resume(acts, "false barge-in")
	}
	return acts
}

// decideOnUtterance settles a barge-in with the final transcript of the speech.
func (t *Turns) decideOnUtterance(words []string, acts []Action) []Action {
	b := t.barge
	if b == nil || b.resolved || t.agent == nil || t.agent.interrupted {
		return acts
	}
	cfg := t.cfg.BargeIn
	if b.minReached && t.realWords(words) >= max(cfg.MinWords, 1) {
		return t.interrupt(acts, "barge-in (final transcript)")
	}
	return t.resume(acts, "backchannel or noise")
}

func (t *Turns) interrupt(acts []Action, reason string) []Action {
	a := t.agent
	t.barge.resolved = true
	a.interrupted = true
	a.paused = false
	acts = append(acts, Action{Interrupt: &ControlTurn{TurnID: a.id, Reason: reason}})
	return t.setState(Overlap, acts)
}

func (t *Turns) resume(acts []Action, reason string) []Action {
	a := t.agent
	t.barge.resolved = true
	t.barge = nil
	if a.paused {
		a.paused = false
		acts = append(acts, Action{Resume: &ControlTurn{TurnID: a.id, Reason: reason}})
	}
	if t.userSpeaking {
		return t.setState(Overlap, acts)
	}
	if a.audible || a.audioQueued {
		return t.setState(AgentSpeaking, acts)
	}
	return t.settle(acts)
}

func (t *Turns) realWords(words []string) int {
	// Multi-word backchannels ("i see") are matched on the whole hypothesis too.
	if len(words) > 0 && t.backs[normalizeWord(strings.Join(words, " "))] {
		return 0
	}
	n := 0
	for _, w := range words {
		if nw := normalizeWord(w); nw != "" && !t.backs[nw] {
			n++
		}
	}
	return n
}

func (t *Turns) onlyBackchannels(words []string) bool { return t.realWords(words) == 0 }

func (t *Turns) setState(s State, acts []Action) []Action {
	if s == t.state {
		return acts
	}
	from := t.state
	t.state = s
	return append(acts, Action{State: &StateChange{From: from, To: s, TurnID: t.AgentTurn()}})
}

// normalizeWord lowercases and strips punctuation other than inner hyphens and
// apostrophes, so "Mm-hmm," matches "mm-hmm".
func normalizeWord(w string) string {
	w = strings.ToLower(strings.TrimSpace(w))
	w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return strings.Join(strings.Fields(w), " ")
}
