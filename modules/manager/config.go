package manager

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

// PrepareConfig makes the agent prepare its reply while the user may still be speaking:
// after a short silence it asks for the reply to the words so far, which stays unheard
// (held by the speaker) until the user's turn ends with the same words, and is dropped
// when the user goes on or the words change.
type PrepareConfig struct {
	// After is the silence after the user's speech that starts the preparation (0: off).
	// The VAD reports the end of a speech segment once its merge gap (200 ms) has
	// passed, so values below that start as soon as the segment ends.
	After time.Duration `yaml:"after"`
}

// Config configures the turn-taking policy.
type Config struct {
	BargeIn  BargeInConfig  `yaml:"barge_in"`
	Reengage ReengageConfig `yaml:"reengage"`
	Prepare  PrepareConfig  `yaml:"prepare"`
}

// DefaultConfig returns the defaults: barge-in after 250 ms and one real word, the usual
// backchannels, no re-engagement, replies prepared after 200 ms of silence.
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
		Prepare: PrepareConfig{After: 200 * time.Millisecond},
	}
}
