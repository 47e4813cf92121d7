package turntaking

import "time"

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
	// punctuation-insensitively. Empty: the Language's (DefaultBackchannels).
	Backchannels []string `yaml:"backchannels"`
	// InterruptWords open real interruptions ("stop", "wait", "no", "hold on", ...): heard
	// early in a sound over the agent they stop it at once. A phrase matches word by
	// word, and the overlap recogniser's language model prefers its words in that order
	// ("hold on" over "old on"). Empty: the Language's (DefaultInterruptWords).
	InterruptWords []string `yaml:"interrupt_words"`
	// Language chooses the default Backchannels and InterruptWords ("en" when empty).
	Language string `yaml:"language"`
	// Hold is what the agent's voice does while a possible barge-in is weighed: "duck"
	// (softer by DuckGain, the default) or "pause".
	Hold string `yaml:"hold"`
	// DuckGain is the level of the ducked voice relative to full volume, in dB (-12).
	DuckGain float64 `yaml:"duck_gain"`
	// Evidence says how the overlap module's evidence decides (when the module runs).
	Evidence EvidenceConfig `yaml:"evidence"`
	// HumText is what the history stores for a backchannel without words (a hum).
	HumText string `yaml:"hum_text"`
	// MaxBackchannel: speech over the agent that lasts longer than this interrupts
	// whatever the recogniser made of it (nobody backchannels for that long); 0 turns
	// the rule off.
	MaxBackchannel time.Duration `yaml:"max_backchannel"`
	// YieldWindow: a voice (or hum) that begins less than this after the agent became
	// audible, or before, interrupts as soon as it sounds like one: a listener's
	// response to what they hear takes a syllable to hear and as long again to begin, so
	// a voice that starts this early was begun before the agent's, and is a turn, not a
	// backchannel (two people who start at once: one yields). 0 turns the rule off.
	YieldWindow time.Duration `yaml:"yield_window"`
	// ContinueWindow: a voice that begins less than this after the agent became audible
	// interrupts once two decodes in a row hold words (other than the agent's own, which a
	// canceller's residue of its voice decodes as) and none has held a backchannel word,
	// while it goes on: the user is going on with a turn the agent took for ended
	// after a pause in it ("please turn off, … the kitchen light"). Hesitations last up to
	// about a second, and the agent answers 300–400 ms into one, so a speaker who goes on
	// does so within 600 ms of its first sound; a listener's backchannel that early is
	// rare, and is let be when the decodes hear one ("yeah", "i see"). A hum or a noise
	// never interrupts by this rule. A voice that interrupts in this window, by any rule,
	// keeps the user's turn rather than takes the agent's: the turn it begins ends by the
	// end-of-turn policy, without end_of_turn.after_interruption's floor. 0 turns it off.
	ContinueWindow time.Duration `yaml:"continue_window"`
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

// Holds of the agent's voice while a barge-in is weighed.
const (
	HoldDuck  = "duck"
	HoldPause = "pause"
)

// EvidenceConfig weighs the overlap module's evidence about a sound over the agent: its
// decodes (words and their confidence, taken every few tens of milliseconds as the sound
// goes on), its acoustics (noise, hum or voice) and its length.
type EvidenceConfig struct {
	// KeywordConfidence: one decode holding an interrupt word this confident interrupts,
	// once KeywordSound of the sound has been decoded. Two decodes in a row opening with
	// the same interrupt word interrupt when either gives it RepeatConfidence: below it a
	// decoder is guessing, as at the residue of the agent's voice that an echo
	// canceller's linear output keeps ("what(0.02) what(0.01)" for a "yeah" over it).
	KeywordConfidence float32       `yaml:"keyword_confidence"`
	KeywordSound      time.Duration `yaml:"keyword_sound"`
	RepeatConfidence  float32       `yaml:"repeat_confidence"`
	// WordConfidence is what a real (not a backchannel) word needs to count, in two of
	// three decodes in a row that open with it (or in one, when none of the three gives
	// it less than TurnWordConfidence): two such words interrupt; and a voice (not a
	// hum) going on past MaxBackchannel interrupts once one such word is there (and, half
	// as long again, once three decodes in a row hold a word anywhere, TurnWordConfidence
	// confident in two). Three decodes in a row that end in the same interrupt word, this
	// confident in each, interrupt too, whatever comes before it.
	WordConfidence float32 `yaml:"word_confidence"`
	// TurnWordConfidence is what a word of the final transcript of a sound that did not
	// interrupt needs to count: a voice whose transcript holds two different such real
	// words is a user turn (after the agent's), not a backchannel. The final decode's
	// confidences are steadier than those of decodes of a sound cut short.
	TurnWordConfidence float32 `yaml:"turn_word_confidence"`
	// BackchannelConfidence: two decodes in a row holding the same backchannel words,
	// each this confident, end the ducking before the sound ends (it is still watched).
	BackchannelConfidence float32 `yaml:"backchannel_confidence"`
	// DoubtConfidence: words a decode gives less confidence than this before an
	// interrupt word do not keep it from opening the sound ("he(0.05) hold on"): they
	// are its guess at a breath or the start of the word.
	DoubtConfidence float32 `yaml:"doubt_confidence"`
	// Rejoin joins the pieces an echo canceller cuts speech over the agent into. A voice over the
	// agent that begins this soon after one that did not interrupt it ended goes on
	// with that one (its length counts from the first's onset, and it comes back once
	// more); and a transcript this soon after one of a voice kept as a backchannel for
	// want of words (its transcript held a real word) is one turn with it, after the
	// agent's, when the two together, or the second alone, are speech. 0: every sound
	// and transcript is weighed alone.
	Rejoin time.Duration `yaml:"rejoin"`
}

// DefaultBackchannels and DefaultInterruptWords are the built-in word lists by language.
var (
	DefaultBackchannels = map[string][]string{
		"en": {"mm-hmm", "mhm", "mm", "hmm", "hm", "uh-huh", "yeah", "yep", "yes", "okay", "ok", "right", "sure", "i see"},
		"de": {"mhm", "hm", "mm", "ja", "genau", "okay", "ok", "stimmt", "aha", "achso"},
		"fr": {"mhm", "hm", "oui", "ouais", "d'accord", "ok", "okay", "voilà", "ah bon"},
		"es": {"mhm", "hm", "sí", "vale", "claro", "ya", "ajá", "ok", "okay"},
	}
	DefaultInterruptWords = map[string][]string{
		"en": {"stop", "wait", "no", "hold", "hang", "what", "why", "how", "sorry", "excuse", "actually", "pardon",
			"hold on", "hang on", "wait a second", "wait a minute", "one second", "one moment", "just a second", "excuse me", "no i meant"},
		"de": {"stopp", "halt", "warte", "moment", "nein", "was", "wie", "warum", "entschuldigung"},
		"fr": {"stop", "attends", "attendez", "non", "quoi", "pourquoi", "comment", "pardon"},
		"es": {"para", "espera", "no", "qué", "cómo", "perdón", "oye"},
	}
)

// WordLists returns the backchannels and interrupt words in force: the configured ones,
// or the language's defaults.
func (c BargeInConfig) WordLists() (backchannels, interrupt []string) {
	lang := c.Language
	if lang == "" {
		lang = "en"
	}
	backchannels, interrupt = c.Backchannels, c.InterruptWords
	if len(backchannels) == 0 {
		backchannels = DefaultBackchannels[lang]
	}
	if len(interrupt) == 0 {
		interrupt = DefaultInterruptWords[lang]
	}
	return backchannels, interrupt
}

// ReengageConfig makes the agent speak up after a long silence (off when After is 0).
type ReengageConfig struct {
	// After is the silence after which the agent speaks up (0: never).
	After time.Duration `yaml:"after"`
	// Text is what the agent says; empty asks the LLM for a turn instead.
	Text string `yaml:"text"`
	// Max is how many times in a row the agent re-engages without an answer (default 1).
	Max int `yaml:"max"`
}

// UnheardConfig makes the agent say that it did not catch speech the recogniser found no
// words in: a user who asked something and hears nothing does not know whether to wait
// or to say it again.
type UnheardConfig struct {
	// MinSpeech is the least speech that is asked to be said again (0: none is): long
	// enough to be words rather than a cough, a knock or a hum.
	MinSpeech time.Duration `yaml:"min_speech"`
	// Text is what the agent says (empty: nothing).
	Text string `yaml:"text"`
}

// PrepareConfig makes the agent prepare its reply while the user may still be speaking:
// after a short silence it asks for the reply to the words so far, which stays unheard
// (held by the speaker) until the user's turn ends with the same words, and is dropped
// when the user goes on or the words change.
type PrepareConfig struct {
	// After is the silence after the user's speech (its padded end) that starts the
	// preparation (0: off). It starts no sooner than the VAD reports a pause: a
	// tentative one after vad.pause_after (32 ms: a window or two after the speech), or
	// else once MinSilence (100 ms) of silence followed it; a pause the speech resumes
	// after withdraws the preparation.
	After time.Duration `yaml:"after"`
}

// Config configures the turn-taking policy.
type Config struct {
	BargeIn  BargeInConfig  `yaml:"barge_in"`
	Reengage ReengageConfig `yaml:"reengage"`
	Unheard  UnheardConfig  `yaml:"unheard"`
	Prepare  PrepareConfig  `yaml:"prepare"`
}

// DefaultConfig returns the defaults: the agent's voice ducked by 12 dB at the first sound
// of the user, barge-in on an interrupt word or two confident real words (with the
// overlap module; otherwise after 250 ms and one real word), English backchannels, no
// re-engagement, speech of 800 ms or more without words asked for again, replies
// prepared after 30 ms of silence.
func DefaultConfig() Config {
	return Config{
		BargeIn: BargeInConfig{
			Enabled:     true,
			MinDuration: 250 * time.Millisecond,
			MinWords:    1,
			Language:    "en",
			Hold:        HoldDuck,
			DuckGain:    -12,
			Evidence: EvidenceConfig{
				KeywordConfidence:     0.95,
				KeywordSound:          200 * time.Millisecond,
				RepeatConfidence:      0.1,
				WordConfidence:        0.8,
				TurnWordConfidence:    0.5,
				BackchannelConfidence: 0.8,
				DoubtConfidence:       0.25,
				Rejoin:                700 * time.Millisecond,
			},
			HumText:        "mm-hmm",
			MaxBackchannel: time.Second,
			YieldWindow:    250 * time.Millisecond,
			ContinueWindow: 600 * time.Millisecond,
			MinStability:   1,
			EarlyWords:     2,
			Grace:          2 * time.Second,
		},
		Unheard: UnheardConfig{MinSpeech: 800 * time.Millisecond, Text: "Sorry, I didn't catch that."},
		// 100 ms: the preparation starts with the VAD's pause (MinSilence after the
		// speech, reported 100–160 ms after it), with the speculative final decode.
		Prepare: PrepareConfig{After: 30 * time.Millisecond},
	}
}
