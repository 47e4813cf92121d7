// Package control holds the dialogue manager's commands to the modules that produce the
// agent's speech (LLM, TTS, speaker). Each of those modules acts on the commands it
// understands and ignores the rest. The end-of-turn policy hears them too: an Interrupt
// says the user's speech took the floor.
package control

import "fmt"

// Action is what a command asks for.
type Action uint8

const (
	// Respond asks the LLM to generate the agent's turn TurnID from the dialogue history.
	Respond Action = iota + 1
	// Pause holds the agent's audio where it is (the user may be barging in).
	Pause
	// Resume continues paused audio from where it paused (the barge-in was not real).
	Resume
	// Interrupt ends turn TurnID at once: the LLM stops generating, the TTS drops what it
	// has not synthesised, and the speaker flushes and reports what was last heard. It
	// also ends any ducking: the next audio plays at full volume.
	Interrupt
	// Prepare asks the LLM to generate agent turn TurnID ahead, from the user's words so
	// far (Text), while the user's turn may not be over: its clauses and audio stay
	// tentative (the speaker holds them) until a Respond for the same turn confirms
	// them, or a Withdraw drops them unheard.
	Prepare
	// Withdraw drops prepared turn TurnID: everything of it is revoked.
	Withdraw
	// Duck lowers the agent's audio to Gain dB with a short ramp, without stopping it:
	// the user may be starting to speak, and the manager has not decided yet whether
	// this is a real interruption. Only the speaker acts on it.
	Duck
	// Unduck brings the agent's audio back to full volume (the sound was a backchannel
	// or noise).
	Unduck
)

func (a Action) String() string {
	switch a {
	case Respond:
		return "respond"
	case Pause:
		return "pause"
	case Resume:
		return "resume"
	case Interrupt:
		return "interrupt"
	case Prepare:
		return "prepare"
	case Withdraw:
		return "withdraw"
	case Duck:
		return "duck"
	case Unduck:
		return "unduck"
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Command is the payload of control IUs.
type Command struct {
	Action Action
	// TurnID is the agent turn the command is about.
	TurnID int
	// Reason says why, for logs and timelines.
	Reason string
	// Text is the user's words a Prepare prepares the turn for.
	Text string
	// Gain is Duck's level relative to full volume, in dB (negative; -12 is a quarter
	// of the amplitude).
	Gain float64
	// UserKeptTurn, on an Interrupt: the user's voice began in the agent's first moments
	// (turn_taking.barge_in.continue_window), so the agent had taken the turn only on a
	// prediction that it had ended. The user kept the turn rather than took it from the
	// agent.
	UserKeptTurn bool
}

// Kind implements iu.Payload.
func (c Command) Kind() string { return "control" }

// Summary implements iu.Payload.
func (c Command) Summary() string {
	s := fmt.Sprintf("%s turn %d", c.Action, c.TurnID)
	if c.Action == Duck {
		s += fmt.Sprintf(" to %.0f dB", c.Gain)
	}
	if c.Text != "" {
		s += fmt.Sprintf(" for %q", c.Text)
	}
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	return s
}
