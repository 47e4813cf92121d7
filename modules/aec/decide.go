package aec

import (
	"fmt"
	"strings"
)

// Mode is the echo_cancel setting.
type Mode string

const (
	// Auto cancels echo unless there is none to cancel: live, unless the output is a
	// headset or the sound server already cancels echo (Decide); in replays, when the
	// replay simulates a laptop (DecideReplay).
	Auto Mode = "auto"
	// On always cancels echo.
	On Mode = "on"
	// Off never does.
	Off Mode = "off"
)

// ParseMode reads an echo_cancel setting: auto (or empty), on, off; YAML's booleans
// (true, false, yes, no) are taken as on and off.
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return Auto, nil
	case "on", "true", "yes":
		return On, nil
	case "off", "false", "no":
		return Off, nil
	}
	return "", fmt.Errorf("aec: echo_cancel %q (want auto, on or off)", s)
}

// Device is what is known of a sound device: its names and descriptions from the audio
// library and the sound server, any of which may say what it is.
type Device struct {
	// Names are the device's names and descriptions, most specific last.
	Names []string
	// Monitor marks the sound server's monitor of a sink (what it plays), which is
	// never an echo-cancelled microphone whatever its name.
	Monitor bool
}

// Devices are the sound devices of a live session.
type Devices struct {
	Output, Input Device
}

// Decision is whether to cancel echo, and why.
type Decision struct {
	On     bool
	Reason string
}

func (d Decision) String() string {
	if d.On {
		return "on: " + d.Reason
	}
	return "off: " + d.Reason
}

// headsetWords mark an output that does not reach the microphone: headphones, earbuds,
// headsets (a Bluetooth headset's hands-free profile included).
var headsetWords = []string{
	"headset", "headphone", "earbud", "earphone", "airpods", "wh-", "wf-", "buds",
	"hands-free", "handsfree", "hands_free", "headset_head_unit", "handsfree_head_unit", "hfp", "hsp",
}

// echoCancelWords mark a sound server's echo-cancelling device (PulseAudio's and
// PipeWire's module-echo-cancel).
var echoCancelWords = []string{"echo-cancel", "echo_cancel", "echo cancel", "echocancel"}

// Decide applies mode to a live session's devices: in Auto, echo is cancelled unless the
// output looks like a headset (its names or descriptions say headset, headphone, earbud,
// AirPods, "WH-", hands-free, ...) or the input is a sound server's echo-cancelled
// source (a source named or described as echo-cancel that is not a monitor).
func Decide(mode Mode, d Devices) Decision {
	switch mode {
	case On:
		return Decision{On: true, Reason: "echo_cancel is on"}
	case Off:
		return Decision{On: false, Reason: "echo_cancel is off"}
	}
	if w, what := match(d.Output, headsetWords); w != "" {
		return Decision{On: false, Reason: fmt.Sprintf("the output %q looks like a headset (%s), whose sound does not reach the microphone", what, w)}
	}
	if !d.Input.Monitor {
		if w, what := match(d.Input, echoCancelWords); w != "" {
			return Decision{On: false, Reason: fmt.Sprintf("the sound server already cancels echo: the input is %q (%s)", what, w)}
		}
	}
	out := "the output"
	if n := len(d.Output.Names); n > 0 {
		out = fmt.Sprintf("the output %q", d.Output.Names[n-1])
	}
	return Decision{On: true, Reason: out + " may reach the microphone (not a headset), and the input is not echo-cancelled"}
}

// DecideReplay applies mode to a replay: in Auto, echo is cancelled when the replay
// simulates a laptop (its scenario has an echo block), since a recording holds no echo
// otherwise.
func DecideReplay(mode Mode, simulated bool) Decision {
	switch {
	case mode == On:
		return Decision{On: true, Reason: "echo_cancel is on"}
	case mode == Off:
		return Decision{On: false, Reason: "echo_cancel is off"}
	case simulated:
		return Decision{On: true, Reason: "the replay simulates a laptop's echo"}
	}
	return Decision{On: false, Reason: "the recording holds no echo of the agent (no echo block)"}
}

// match returns the first of words found (case-insensitively) in the device's names,
// and the name it was found in.
func match(d Device, words []string) (word, in string) {
	for _, t := range d.Names {
		lt := strings.ToLower(t)
		for _, w := range words {
			if strings.Contains(lt, w) {
				return w, t
			}
		}
	}
	return "", ""
}
