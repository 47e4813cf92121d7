package turntaking

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
)

// pausing is the default configuration with the voice held by pausing it, as the
// scenarios of turns_test.go were written for.
func pausing() Config {
	c := DefaultConfig()
	c.BargeIn.Hold = HoldPause
	return c
}

// describeSoft is describe with the actions of soft barge-ins.
func describeSoft(acts []Action) []string {
	var out []string
	for _, a := range acts {
		switch {
		case a.Command != nil && a.Command.Action == control.Duck:
			out = append(out, fmt.Sprintf("duck %d %.0f", a.Command.TurnID, a.Command.Gain))
		case a.Command != nil && a.Command.Action == control.Unduck:
			out = append(out, fmt.Sprintf("unduck %d", a.Command.TurnID))
		case a.Backchannel != nil && a.Backchannel.Text == "":
			out = append(out, fmt.Sprintf("noise %d", a.Backchannel.TurnID))
		case a.Backchannel != nil:
			out = append(out, fmt.Sprintf("backchannel %d %q %s", a.Backchannel.TurnID, a.Backchannel.Text, a.Backchannel.Sound))
		default:
			out = append(out, describe([]Action{a})...)
		}
	}
	return out
}

// w is a decoded word "text:confidence".
func w(s string) ScoredWord {
	text, conf, _ := strings.Cut(s, ":")
	var c float32 = 1
	if conf != "" {
		fmt.Sscan(conf, &c)
	}
	return ScoredWord{Text: text, Confidence: c}
}

// sound is overlap evidence about a sound that began at onset ms: its kind, how much of
// it (ms) the decode of words covered (which also numbers the decode).
func sound(onset int, kind SoundKind, decoded int, words ...string) Event {
	s := &OverlapSound{Onset: at(onset), Kind: kind, DecodedTo: time.Duration(decoded) * time.Millisecond, Decodes: decoded}
	for _, x := range words {
		s.Words = append(s.Words, w(x))
	}
	return Event{Sound: s}
}

// ended marks evidence as the sound having stopped at end ms; final as the module's
// last word.
func ended(ev Event, end int) Event {
	s := *ev.Sound
	s.Ended, s.End = true, at(end)
	return Event{Sound: &s}
}

func final(ev Event) Event {
	s := *ev.Sound
	s.Final = true
	return Event{Sound: &s}
}

func droppedSound(onset int) Event {
	return Event{Sound: &OverlapSound{Onset: at(onset), Dropped: true, Ended: true, Final: true}}
}

func scoredUtterance(text string, words ...string) Event {
	u := &Utterance{Text: text}
	for _, x := range words {
		u.Words = append(u.Words, w(x))
	}
	return Event{Utterance: u}
}

// spanUtterance is scoredUtterance of speech from start to end ms.
func spanUtterance(start, end int, text string, words ...string) Event {
	ev := scoredUtterance(text, words...)
	ev.Utterance.Start, ev.Utterance.End = time.Duration(start)*time.Millisecond, time.Duration(end)*time.Millisecond
	return ev
}

// TestSoftBargeIns runs scenarios of sounds over the agent with the overlap module's
// evidence, with the defaults: the voice is ducked, never paused.
// timedUtterance is a transcript of the user's speech from start to end ms.
func timedUtterance(text string, start, end int, words ...string) Event {
	ev := scoredUtterance(text, words...)
	ev.Utterance.Start, ev.Utterance.End = time.Duration(start)*time.Millisecond, time.Duration(end)*time.Millisecond
	return ev
}

// voiceInTwo is "go forward ten meters" over the agent's turn 2 as a real-clock laptop
// replay of bench.yaml heard it through a young canceller: "go for…", kept as a
// backchannel, then "…ten meters" from second ms on, a voice that does not interrupt.
// afterAgent is what follows the agent's turn when it finishes.
func voiceInTwo(second int, afterAgent ...string) []step {
	return voiceInTwoHeard(second, heardAs{"we're in for", []string{"we're:0.3", "in:0.4", "for:0.45"}},
		heardAs{"risk", []string{"risk:0.4"}}, afterAgent...)
}

// heardAs is a transcript and its scored words.
type heardAs struct {
	text  string
	words []string
}

// voiceInTwoHeard is voiceInTwo with the transcripts of its two pieces.
func voiceInTwoHeard(second int, first, rest heardAs, afterAgent ...string) []step {
	const onset = 3000
	end := second + 310
	return concat(speakingAgent(), []step{
		{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
		{ms: 3160, ev: sound(onset, SoundVoice, 160, "go:0.29", "for:1")},
		{ms: 3260, ev: speechStart(onset)},
		{ms: 3490, ev: ended(sound(onset, SoundVoice, 440, "go:0.2", "for:0.45", "were:0.23"), 3440), want: []string{"unduck 2"}},
		{ms: 3500, ev: speechEnd(3440)},
		{ms: 3700, ev: final(ended(sound(onset, SoundVoice, 440, "go:0.2", "for:0.39", "would:0.38"), 3440))},
		{ms: 3900, ev: timedUtterance(first.text, onset, 3440, first.words...)},
		{ms: second + 100, ev: candidate(second), want: []string{"duck 2 -12"}},
		{ms: second + 210, ev: sound(second, SoundVoice, 210, "me:0.12", "first:1")},
		{ms: second + 320, ev: speechStart(second)},
		{ms: second + 340, ev: ended(sound(second, SoundVoice, 310, "me:0.09", "first:0.75"), end), want: []string{"unduck 2"}},
		{ms: second + 540, ev: final(ended(sound(second, SoundVoice, 510, "me:0.09", "first:0.77"), end))},
		{ms: second + 610, ev: speechEnd(end)},
		{ms: second + 640, ev: timedUtterance(rest.text, second, end, rest.words...)},
		{ms: 5700, ev: reply(2, "Once upon a time.", false)},
		{ms: 5710, ev: queued(2, true)},
		{ms: 6000, ev: finished(2), want: append([]string{`agent 2 "Once upon a time."`}, afterAgent...)},
	})
}

// goFor is "go for…", the first piece of "go forward ten meters" over the agent's turn
// 2 through a young canceller, from 3000 ms: a voice that ends at 3780 ms, having come
// back once, without interrupting.
func goFor() []step {
	const onset = 3000
	voice := func(ms int, words ...string) Event { return sound(onset, SoundVoice, ms-onset, words...) }
	return []step{
		{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
		{ms: 3250, ev: voice(3250, "go:0.27", "for:1")},
		{ms: 3330, ev: voice(3330, "go:0.25", "for:1")},
		{ms: 3600, ev: ended(voice(3590, "go:0.09", "for:0.26", "were:0.04"), 3590), want: []string{"unduck 2"}},
		{ms: 3750, ev: voice(3750, "go:0.11", "for:0.3", "what:0.26"), want: []string{"duck 2 -12"}},
		{ms: 3850, ev: final(ended(voice(3770, "go:0.14", "for:0.32", "what:0.59"), 3780)), want: []string{"unduck 2"}},
	}
}

func TestSoftBargeIns(t *testing.T) {
	const onset = 3000
	voice := func(ms int, words ...string) Event { return sound(onset, SoundVoice, ms-onset, words...) }
	hum := func(ms int, words ...string) Event { return sound(onset, SoundHum, ms-onset, words...) }
	tests := []struct {
		name  string
		cfg   func(*Config)
		steps []step
		final State
	}{
		{
			name: "a cough the VAD withdraws: ducked, then full volume",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3040, ev: sound(onset, SoundUnknown, 0)},
				{ms: 3150, ev: sound(onset, SoundNoise, 100, "the:0.4")},
				{ms: 3200, ev: dropped(), want: []string{"unduck 2"}},
				{ms: 3200, ev: droppedSound(onset)},
			}),
			final: AgentSpeaking,
		},
		{
			name: "a hum never interrupts, whatever the recogniser makes of it, and is a backchannel",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3100, ev: voice(3100)},
				{ms: 3160, ev: voice(3160, "an:1")},
				{ms: 3220, ev: voice(3220, "and:0.4")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3280, ev: voice(3280, "an:0.33", "an:1")},
				{ms: 3340, ev: voice(3340, "an:0.35", "an:1")},
				{ms: 3400, ev: voice(3400, "an:0.36", "am:1")},
				{ms: 3460, ev: hum(3460, "an:0.39", "an:0.36", "may:1"), want: []string{"unduck 2"}},
				{ms: 3520, ev: hum(3520, "an:0.4", "an:0.34", "make:1")},
				// Too long for a backchannel, but a hum.
				{ms: 4000, tick: true},
				{ms: 4100, ev: ended(hum(4100, "an:0.4", "an:0.3", "may:0.9", "can:1"), 4000)},
				{ms: 4300, ev: speechEnd(4030)},
				{ms: 4310, ev: final(ended(hum(4100, "an:0.4", "an:0.3", "may:0.9", "can:1"), 4000))},
				{ms: 4800, ev: scoredUtterance("none of them", "none:0.7", "of:0.6", "them:0.9")},
				{ms: 4900, ev: reply(2, "Once upon a time.", false)},
				{ms: 4910, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `backchannel 2 "mm-hmm" hum`}},
			}),
			final: SilenceAfterAgent,
		},
		{
			name: "two decodes agreeing on a confident backchannel restore the voice early",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "yeah:0.68")},
				{ms: 3220, ev: voice(3220, "yeah:1"), want: []string{"unduck 2"}},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3280, ev: voice(3280, "yeah:1")},
				{ms: 3420, ev: ended(voice(3320, "yeah:1"), 3320)},
				{ms: 3540, ev: speechEnd(3350)},
				{ms: 3550, ev: final(ended(voice(3320, "yeah:1"), 3320))},
				{ms: 4200, ev: scoredUtterance("yeah", "yeah:0.98"), want: nil},
				{ms: 4300, ev: reply(2, "Once upon a time.", false)},
				{ms: 4310, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `backchannel 2 "yeah" voice`}},
			}),
			final: SilenceAfterAgent,
		},
		{
			// flite awb's "right" on the real clock.
			name: "two decodes opening with different interrupt words are guesses: \"right\" heard as \"how\", then \"stop\"",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3100, ev: voice(3100)},
				{ms: 3140, ev: voice(3140, "how:1")},
				{ms: 3190, ev: voice(3190, "stop:1")}, // decoded to 190 ms: a keyword needs 200
				{ms: 3240, ev: voice(3240, "by:1")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3280, ev: voice(3280, "right:1")},
				{ms: 3320, ev: voice(3320, "right:1"), want: []string{"unduck 2"}},
				{ms: 3400, ev: ended(voice(3360, "right:0.92"), 3360)},
				{ms: 3540, ev: speechEnd(3370)},
				{ms: 3550, ev: final(ended(voice(3360, "right:0.96"), 3360))},
				{ms: 4200, ev: scoredUtterance("right", "right:0.9"), want: nil},
				{ms: 4300, ev: reply(2, "Once upon a time.", false)},
				{ms: 4310, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `backchannel 2 "right" voice`}},
			}),
			final: SilenceAfterAgent,
		},
		{
			name: "a short acknowledgement: full volume when it ends",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "by:1")},
				{ms: 3220, ev: voice(3220, "right:0.9")},
				{ms: 3280, ev: speechStart(onset)},
				{ms: 3390, ev: ended(voice(3280, "right:0.9"), 3290), want: []string{"unduck 2"}},
				{ms: 3400, ev: ended(voice(3290, "right:0.98"), 3290)},
			}),
			final: Overlap,
		},
		{
			name: "a confident interrupt word stops the agent at once",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3100, ev: sound(onset, SoundNoise, 100)},
				{ms: 3180, ev: sound(onset, SoundNoise, 180, "to:0.71")},
				{ms: 3240, ev: voice(3240, "stop:1"), want: []string{"interrupt 2"}},
				{ms: 3250, ev: stopped(2)},
				{ms: 3260, ev: reply(2, "Once upon a time there was a dragon.", true), want: []string{`agent-cut 2 "Once upon a time there was a dragon."`}},
				{ms: 3270, ev: speechStart(onset)},
				{ms: 3700, ev: speechEnd(3700)},
				{ms: 4450, ev: scoredUtterance("stop", "stop:0.99"), want: []string{`user 3 "stop"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "an interrupt word too early to trust waits for the next decode",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3140, ev: voice(3140, "how:1")},
				{ms: 3200, ev: voice(3200, "tell:1")},
				{ms: 3260, ev: voice(3260, "by:0.27")},
				{ms: 3320, ev: voice(3320, "right:0.95")},
				{ms: 3380, ev: voice(3380, "right:0.95"), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "an interrupt word after other words is a guess at a hum",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3400, ev: voice(3400, "a:0.49", "to:1")},
				{ms: 3460, ev: voice(3460, "a:0.48", "stop:1")},
				{ms: 3520, ev: voice(3520, "a:0.5", "sorry:1")},
				{ms: 3580, ev: voice(3580, "but:0.3", "what:0.2")},
				{ms: 3640, ev: voice(3640, "but:0.3", "what:0.2")},
			}),
			final: AgentSpeaking,
		},
		{
			name: "an interrupt phrase counts after a word the decode doubts, all its words confident",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3340, ev: voice(3340, "tell:1")},
				{ms: 3500, ev: voice(3500, "yeah:0.19", "hold:0.96", "on:0.6")},
				{ms: 3540, ev: voice(3540, "yeah:0.19", "one:0.97", "thing:1")},
				{ms: 3580, ev: voice(3580, "yeah:0.19", "one:0.97", "second:1"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "a single interrupt word after a word the decode doubts is a guess at a hum",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3400, ev: voice(3400, "they:0.22", "actually:1")},
				{ms: 3460, ev: voice(3460, "they:0.2", "actually:1")},
				{ms: 3520, ev: voice(3520, "them:0.17", "am:0.12", "hold:1", "on:1")},
			}),
			final: AgentSpeaking,
		},
		{
			name: "interrupt words in two decodes in a row interrupt, unsure as they are",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "hang:0.13")},
				{ms: 3220, ev: voice(3220, "hang:0.11"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			// As a canceller's linear output makes of a "yeah" over the agent's voice.
			name: "interrupt words two decodes barely guess at do not interrupt",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "what:0.02")},
				{ms: 3220, ev: voice(3220, "what:0.06")},
				{ms: 3280, ev: voice(3280, "what:0.04")},
				{ms: 3300, ev: ended(voice(3300, "what:0.04"), 3300), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			// "wait, stop" over the agent, decoded from a canceller's linear output: the
			// residue of the agent's voice garbles "wait".
			name: "three decodes ending in the same confident interrupt word interrupt",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3500, ev: voice(3500, "you:0.21", "can't:0.23", "its:0.2")},
				{ms: 3560, ev: voice(3560, "it:0.23", "and:0.1", "stop:1")},
				{ms: 3600, ev: voice(3600, "you:0.24", "can't:0.3", "stop:0.85")},
				{ms: 3640, ev: voice(3640, "you:0.25", "can't:0.32", "stop:0.88"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			// festival kal's "okay, okay, right": the second "okay" begins as "no".
			name: "an interrupt word ending decodes after a backchannel is the next backchannel's start",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3300, ev: voice(3300, "okay:1")},
				{ms: 3340, ev: voice(3340, "okay:1"), want: []string{"unduck 2"}},
				{ms: 3540, ev: voice(3540, "okay:0.5", "or:0.07"), want: []string{"duck 2 -12"}},
				{ms: 3580, ev: voice(3580, "okay:0.5", "no:1")},
				{ms: 3620, ev: voice(3620, "okay:0.5", "no:1")},
				{ms: 3660, ev: voice(3660, "okay:0.5", "no:1")},
				{ms: 3700, ev: voice(3700, "okay:0.5", "no:0.75")},
				{ms: 3780, ev: voice(3780, "okay:0.5", "okay:1")},
				{ms: 3860, ev: ended(voice(3820, "okay:0.5", "okay:1"), 3820), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			// As the linear output makes of a hummed "hmm" over the agent.
			name: "a hum's drift through confident interrupt words does not interrupt",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3520, ev: voice(3520, "you:0.13", "can't:1")},
				{ms: 3640, ev: voice(3640, "you:0.15", "actually:0.9")},
				{ms: 3680, ev: voice(3680, "you:0.13", "actually:0.9")},
				{ms: 3720, ev: voice(3720, "you:0.07", "can't:0.42", "him:1")},
				{ms: 3760, ev: voice(3760, "you:0.07", "actually:0.7", "i'm:1")},
				{ms: 4040, ev: voice(4040, "you:0.04", "actually:0.84", "him:0.05", "them:0.19")},
				{ms: 4080, ev: voice(4080, "you:0.06", "actually:0.84", "him:0.05", "them:0.2")},
				{ms: 4140, ev: ended(voice(4140, "you:0.09", "actually:0.82", "him:0.05", "them:0.19"), 4140), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "two confident real words, the same in three decodes, interrupt",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3400, ev: voice(3400, "tell:0.9")},
				{ms: 3460, ev: voice(3460, "tell:0.93", "more:1")},
				{ms: 3520, ev: voice(3520, "tell:0.89", "more:1", "about:0.3")},
				{ms: 3580, ev: voice(3580, "tell:0.89", "more:1", "about:0.6"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "a word whose confidence sinks as more is decoded counts when two of three decodes are sure of it",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3400, ev: voice(3400, "go:0.95", "for:1")},
				{ms: 3480, ev: voice(3480, "go:0.85", "for:1")},
				{ms: 3600, ev: voice(3600, "go:0.75", "for:1"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "a word one of three decodes is sure of counts when none doubts it",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3400, ev: voice(3400, "go:0.85", "for:1")},
				{ms: 3480, ev: voice(3480, "go:0.68", "for:1")},
				{ms: 3600, ev: voice(3600, "go:0.69", "for:1"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "a word one of three decodes is sure of and another doubts does not count",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3400, ev: voice(3400, "go:0.95", "for:1")},
				{ms: 3480, ev: voice(3480, "go:0.45", "for:1")},
				{ms: 3600, ev: voice(3600, "go:0.75", "for:1")},
			}),
			final: AgentSpeaking,
		},
		{
			name: "a long hum's drift of short words does not interrupt",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3740, ev: voice(3740, "an:0.38", "an:0.37", "may:1")},
				{ms: 3800, ev: voice(3800, "an:0.41", "an:0.35", "may:1")},
				{ms: 3860, ev: voice(3860, "an:0.42", "an:0.26", "may:0.53")},
				{ms: 3920, ev: voice(3920, "an:0.42", "an:0.3", "may:0.64", "its:1")},
				{ms: 3980, ev: voice(3980, "an:0.42", "am:0.36", "into:0.57")},
				{ms: 4000, tick: true},
				{ms: 4040, ev: voice(4040, "an:0.42", "an:0.27", "may:0.62", "can:1")},
				{ms: 4100, ev: voice(4100, "an:0.42", "an:0.26", "may:0.63", "can:1")},
				{ms: 4160, ev: voice(4160, "an:0.41", "an:0.28", "may:0.44", "can:0.34", "may:1")},
				{ms: 4220, ev: voice(4220, "an:0.4", "an:0.22", "may:0.36", "can:0.26", "now:1")},
				{ms: 4540, ev: ended(voice(4520, "an:0.39", "an:0.28", "may:0.44", "can:0.4", "am:0.39"), 4520), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "the first word of a two-word backchannel is no real word",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3170, ev: voice(3170, "i:0.91")},
				{ms: 3230, ev: voice(3230, "i:0.92")},
				{ms: 3290, ev: voice(3290, "i:0.94", "see:1")},
				{ms: 3350, ev: voice(3350, "i:0.94", "see:0.89"), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "confident words after a doubtful start are a decode's drift, not speech",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 4080, ev: voice(4080, "an:0.21", "an:0.3", "make:0.88", "yeah:0.98")},
				{ms: 4160, ev: voice(4160, "an:0.2", "an:0.31", "make:0.82", "yeah:0.97", "now:1")},
				{ms: 4200, ev: voice(4200, "an:0.21", "an:0.31", "make:0.82", "yeah:0.97", "now:1")},
				{ms: 4240, ev: voice(4240, "an:0.26", "an:0.46", "make:0.95", "yeah:0.98", "now:0.82")},
			}),
			final: AgentSpeaking,
		},
		{
			// hesitation-silent-03 of the evaluation (espeak-ng en-us+f3): "please turn off, …
			// the kitchen light". The agent answered in the pause and became audible at
			// 2000 ms; the user goes on 320 ms later, and the overlap decodes drift.
			name: "a voice in the agent's first 600 ms that two decodes hear words in, none a backchannel: the user goes on, and the agent yields",
			steps: concat(speakingAgent(), []step{
				{ms: 2390, ev: candidate(2320), want: []string{"duck 2 -12"}},
				{ms: 2440, ev: sound(2320, SoundVoice, 120)},
				{ms: 2620, ev: sound(2320, SoundVoice, 300, "to:1")},
				{ms: 2660, ev: sound(2320, SoundVoice, 340, "to:0.13"), want: []string{"interrupt 2, the user's turn"}},
			}),
			final: Overlap,
		},
		{
			// hesitation-filled-03 of the evaluation on the simulated laptop, with the
			// suppressor tuned for double talk: 500 ms into the answer "Anna, you can't find
			// it", the canceller's residue of "you" makes a sound that two decodes hear as the
			// agent's own word. It is no voice of the user's.
			name: "the agent's own words in the decodes of a sound in its first 600 ms (the canceller's residue): no yield",
			steps: concat(speakingAgent(), []step{
				{ms: 2100, ev: Event{Audio: &AudioHeard{TurnID: 2, Playing: true,
					Heard: &dialogue.Position{TurnID: 2, Clause: "Anna, you can't", WordStart: 6, WordEnd: 9, WordFraction: 0.5}}}},
				{ms: 2560, ev: candidate(2470), want: []string{"duck 2 -12"}},
				{ms: 2600, ev: sound(2470, SoundVoice, 102, "you:1")},
				{ms: 2640, ev: sound(2470, SoundVoice, 142, "you:0.27")},
				{ms: 2700, ev: sound(2470, SoundNoise, 202, "you:0.27")},
				{ms: 2880, ev: droppedSound(2470), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			// backchannel-word-01 (festival cmu_us_slt_arctic_hts): "yeah", 300 ms into the answer.
			name: "a backchannel word in the decodes of a voice in the agent's first 600 ms: no yield",
			steps: concat(speakingAgent(), []step{
				{ms: 2370, ev: candidate(2300), want: []string{"duck 2 -12"}},
				{ms: 2480, ev: sound(2300, SoundVoice, 180, "yeah:0.16")},
				{ms: 2520, ev: sound(2300, SoundVoice, 220, "yeah:0.75")},
				{ms: 2560, ev: sound(2300, SoundVoice, 260, "yeah:0.96"), want: []string{"unduck 2"}},
				{ms: 2600, ev: sound(2300, SoundVoice, 300, "had:0.16"), want: []string{"duck 2 -12"}},
				{ms: 2640, ev: sound(2300, SoundVoice, 340, "had:0.13")},
				{ms: 2680, ev: ended(sound(2300, SoundVoice, 380, "had:0.13"), 2660), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "a hum in the agent's first 600 ms, decoded as words: no yield",
			steps: concat(speakingAgent(), []step{
				{ms: 2370, ev: candidate(2300), want: []string{"duck 2 -12"}},
				{ms: 2600, ev: sound(2300, SoundHum, 300, "modem:0.4"), want: []string{"unduck 2"}},
				{ms: 2640, ev: sound(2300, SoundHum, 340, "modem:0.3", "on:0.2")},
				{ms: 2700, ev: ended(sound(2300, SoundHum, 400, "modem:0.3"), 2690)},
			}),
			final: AgentSpeaking,
		},
		{
			name: "the same voice 700 ms into the answer is weighed as any other",
			steps: concat(speakingAgent(), []step{
				{ms: 2770, ev: candidate(2700), want: []string{"duck 2 -12"}},
				{ms: 3000, ev: sound(2700, SoundVoice, 300, "to:1")},
				{ms: 3040, ev: sound(2700, SoundVoice, 340, "to:0.13")},
				{ms: 3100, ev: ended(sound(2700, SoundVoice, 400, "to:0.1"), 3090), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "a voice too long for a backchannel interrupts once it holds a confident word",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3600, ev: voice(3600, "tell:0.85")},
				{ms: 3660, ev: voice(3660, "tell:0.85", "down:1")},
				{ms: 3720, ev: voice(3720, "tell:0.85", "down:0.4")},
				{ms: 3999, tick: true},
				{ms: 4000, tick: true, want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			// "actually, tell me about the moon" over the agent on the simulated laptop
			// (the evaluation's barge-in-early-05): the decodes never agree on how it
			// opens, and hold "tell" from the third on.
			name: "a voice far past a backchannel's length interrupts on a word its decodes hold wherever they place it",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3600, ev: voice(3600, "the:0.84", "on:0.14", "to:0.28")},
				{ms: 3660, ev: voice(3660, "two:0.23", "on:0.46", "tell:1")},
				{ms: 3720, ev: voice(3720, "the:0.43", "i:0.34", "tell:1")},
				{ms: 4100, ev: voice(4100, "little:0.02", "can:0.12", "tell:0.69")},
				{ms: 4400, ev: voice(4400, "two:0.14", "it:0.7", "tell:0.61", "me:0.48")},
				// One and a half seconds after its onset.
				{ms: 4500, ev: voice(4500, "two:0.13", "it:0.62", "tell:0.59", "me:0.3", "let:0.15"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "a voice that keeps coming back past MaxBackchannel interrupts whatever its decodes say",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3110, ev: voice(3110, "to:0.32")},
				{ms: 3500, ev: ended(voice(3450, "sure:0.93", "and:0.16"), 3450), want: []string{"unduck 2"}},
				{ms: 3560, ev: voice(3560, "sure:0.97", "and:0.2"), want: []string{"duck 2 -12"}},
				{ms: 3880, ev: ended(voice(3820, "sure:0.99", "an:0.19", "lot:0.58"), 3820), want: []string{"unduck 2"}},
				{ms: 4040, ev: voice(4040, "sure:0.99", "an:0.2", "lot:0.63"), want: []string{"duck 2 -12"}},
				{ms: 4080, ev: voice(4080, "sure:1", "an:0.18", "lot:0.65", "the:1"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			// "go forward ten meters" over a young canceller (a real-clock laptop replay
			// of bench.yaml): the suppressor leaves "go for…" and "…ten meters", 210 ms
			// apart.
			name: "a voice cut into pieces goes on from the first piece",
			steps: concat(speakingAgent(), goFor(), []step{
				{ms: 3900, ev: candidate(3990), want: []string{"duck 2 -12"}},
				{ms: 4260, ev: sound(3990, SoundHum, 270, "time:0.31", "me:0.06"), want: []string{"unduck 2"}},
				{ms: 4390, ev: sound(3990, SoundVoice, 400, "time:0.27", "these:0.11"), want: []string{"duck 2 -12"}},
				// Past MaxBackchannel from the first piece's onset, back twice, and more
				// words beside backchannels than that.
				{ms: 4520, ev: sound(3990, SoundVoice, 530, "time:0.23", "we're:0.43", "is:1"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			// The bench.yaml barge-in on the simulated laptop: the suppressor cuts "go" short,
			// and the VAD withdraws it as too short just as the rest begins.
			name: "a voice the VAD withdrew goes on in the sound that follows it closely",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(3000), want: []string{"duck 2 -12"}},
				{ms: 3150, ev: sound(3000, SoundVoice, 150, "go:0.45")},
				{ms: 3290, ev: dropped(), want: []string{"unduck 2"}},
				{ms: 3390, ev: candidate(3280), want: []string{"duck 2 -12"}},
				{ms: 3600, ev: sound(3280, SoundVoice, 320, "before:0.85")},
				{ms: 3640, ev: sound(3280, SoundVoice, 360, "before:0.86")},
				{ms: 3680, ev: sound(3280, SoundVoice, 400, "before:0.87", "your:0.1")},
				// MaxBackchannel from the withdrawn voice's onset, not from this one's.
				{ms: 3999, tick: true},
				{ms: 4000, tick: true, want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "a voice that follows a settled one after more than the rejoin gap is weighed alone",
			steps: concat(speakingAgent(), goFor(), []step{
				{ms: 4600, ev: candidate(4500), want: []string{"duck 2 -12"}},
				{ms: 4770, ev: sound(4500, SoundHum, 270, "time:0.31", "me:0.06"), want: []string{"unduck 2"}},
				{ms: 4900, ev: sound(4500, SoundVoice, 400, "time:0.27", "these:0.11"), want: []string{"duck 2 -12"}},
				{ms: 5030, ev: sound(4500, SoundVoice, 530, "time:0.23", "we're:0.43", "is:1")},
				{ms: 5190, ev: sound(4500, SoundVoice, 690, "time:0.12", "me:0.15", "first:1")},
				{ms: 5200, ev: ended(sound(4500, SoundVoice, 700, "time:0.12", "me:0.15", "first:1"), 5200), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "a sound the VAD withdraws, its evidence first, leaves no verdict for the user's next turn",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3150, ev: sound(onset, SoundNoise, 100, "the:0.4")},
				{ms: 3200, ev: droppedSound(onset), want: []string{"unduck 2"}},
				{ms: 3200, ev: dropped()},
				{ms: 3300, ev: reply(2, "Once upon a time.", false)},
				{ms: 3310, ev: queued(2, true)},
				{ms: 4000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`}},
			}, userTurn(5000, 6000, "what happened next", `user 3 "what happened next"`, "respond 4")),
			final: SilenceAfterUser,
		},
		{
			name: "a backchannel repeated in phrases stays one",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3110, ev: voice(3110, "to:0.32")},
				{ms: 3500, ev: ended(voice(3450, "yeah:0.6"), 3450), want: []string{"unduck 2"}},
				{ms: 3560, ev: voice(3560, "yeah:0.6", "yeah:0.3"), want: []string{"duck 2 -12"}},
				{ms: 3880, ev: ended(voice(3820, "yeah:0.6", "yeah:0.5", "a:0.4"), 3820), want: []string{"unduck 2"}},
				{ms: 4040, ev: voice(4040, "yeah:0.6", "yeah:0.5", "okay:0.4", "to:0.3"), want: []string{"duck 2 -12"}},
				{ms: 4300, ev: ended(voice(4250, "yeah:0.6", "yeah:0.5", "okay:0.4", "to:0.3"), 4250), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "a backchannel that comes back once stays one",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "yeah:0.7")},
				{ms: 3400, ev: ended(voice(3300, "yeah:0.7"), 3300), want: []string{"unduck 2"}},
				{ms: 3500, ev: voice(3500, "yeah:0.7", "yeah:0.5"), want: []string{"duck 2 -12"}},
				{ms: 4100, ev: voice(4100, "yeah:0.7", "yeah:0.6")},
				{ms: 4300, ev: ended(voice(4200, "yeah:0.7", "yeah:0.6"), 4200), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "a sound that starts again after its end is ducked again",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "yeah:0.7")},
				{ms: 3400, ev: ended(voice(3300, "yeah:0.7"), 3300), want: []string{"unduck 2"}},
				{ms: 3500, ev: voice(3500, "yeah:0.9", "but:0.4"), want: []string{"duck 2 -12"}},
				{ms: 3560, ev: voice(3560, "yeah:0.9", "wait:0.6")},
				{ms: 3620, ev: voice(3620, "yeah:0.9", "wait:0.8"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			name: "a transcript with confident words after a backchannel verdict is a turn after the agent's",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "the:0.3")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3390, ev: ended(voice(3290, "the:0.3"), 3290), want: []string{"unduck 2"}},
				{ms: 3500, ev: speechEnd(3320)},
				{ms: 3510, ev: final(ended(voice(3290, "the:0.3"), 3290))},
				{ms: 4100, ev: scoredUtterance("tell me more", "tell:0.8", "me:0.9", "more:0.7")},
				{ms: 4300, ev: reply(2, "Once upon a time.", false)},
				{ms: 4310, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `user 3 "tell me more"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			// flite rms's "hmm" on the real clock, in one replay of four.
			name: "a one-letter word is no sure word: a voice heard as \"a champ\" is a backchannel",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "they:1")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3700, ev: voice(3700, "they:0.52", "to:0.21", "mhm:0.26")},
				{ms: 3820, ev: ended(voice(3720, "they:0.51", "to:0.25", "mhm:0.46"), 3720), want: []string{"unduck 2"}},
				{ms: 3900, ev: speechEnd(3750)},
				{ms: 3910, ev: final(ended(voice(3720, "they:0.53", "to:0.27", "mhm:0.46"), 3720))},
				{ms: 4230, ev: scoredUtterance("a champ", "a:0.86", "champ:0.62")},
				{ms: 4300, ev: reply(2, "Once upon a time.", false)},
				{ms: 4310, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `backchannel 2 "mhm" voice`}},
			}),
			final: SilenceAfterAgent,
		},
		{
			// One transcript over two sounds, the second of which the canceller left as a
			// noise ("…meters").
			name: "a transcript spanning a voice and a noise is no noise",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "go:0.29", "for:1")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3490, ev: ended(voice(3450, "go:0.24", "for:0.37", "were:0.23"), 3450), want: []string{"unduck 2"}},
				{ms: 3600, ev: final(ended(voice(3450, "go:0.24", "for:0.37", "were:0.23"), 3450))},
				{ms: 4190, ev: candidate(4090), want: []string{"duck 2 -12"}},
				{ms: 4300, ev: sound(4090, SoundNoise, 210, "he:0.05", "first:1")},
				{ms: 4410, ev: speechStart(4090)},
				{ms: 4430, ev: ended(sound(4090, SoundNoise, 310, "he:0.04", "first:0.86"), 4400), want: []string{"unduck 2"}},
				{ms: 4630, ev: final(ended(sound(4090, SoundNoise, 510, "he:0.04", "first:0.89"), 4400))},
				{ms: 4700, ev: speechEnd(4400)},
				{ms: 5660, ev: scoredUtterance("over the risk", "over:0.9", "the:0.6", "risk:0.8")},
				{ms: 5700, ev: reply(2, "Once upon a time.", false)},
				{ms: 5710, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `user 3 "over the risk"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			// Two transcripts 650 ms apart, too short and too unsure alone.
			name:  "two transcripts of a voice cut in two are one turn after the agent's",
			steps: voiceInTwo(4090, `user 3 "we're in for risk"`, "respond 4"),
			final: SilenceAfterUser,
		},
		{
			// The first transcript a backchannel beside a real word: "go for…" heard as
			// "for sure" (a real-clock laptop replay of bench.yaml).
			name: "a piece heard as a backchannel beside a real word is one turn with the transcript that follows it",
			steps: voiceInTwoHeard(4090, heardAs{"for sure", []string{"for:0.6", "sure:0.9"}},
				heardAs{"ten meters", []string{"ten:0.6", "meters:0.7"}}, `user 3 "for sure ten meters"`, "respond 4"),
			final: SilenceAfterUser,
		},
		{
			name:  "transcripts of a voice further apart than the rejoin gap stay apart",
			steps: voiceInTwo(4190, `backchannel 2 "mm-hmm" voice`, `backchannel 2 "mm-hmm" voice`),
			final: SilenceAfterAgent,
		},
		{
			// A real-clock laptop replay of bench.yaml: "…ten meters" goes on with "go
			// for…", interrupts the agent, and is then too short for the VAD to keep.
			name: "a piece kept as a backchannel opens the turn of the voice that went on with it and interrupted",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "go:0.21", "for:1")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3440, ev: ended(voice(3440, "go:0.21", "for:0.55", "were:0.16"), 3440), want: []string{"unduck 2"}},
				{ms: 3500, ev: voice(3500, "go:0.23", "for:0.57", "were:0.17"), want: []string{"duck 2 -12"}},
				{ms: 3520, ev: speechEnd(3440)},
				{ms: 3600, ev: final(ended(voice(3600, "go:0.23", "for:0.52", "what:0.31"), 3520)), want: []string{"unduck 2"}},
				{ms: 3900, ev: timedUtterance("in short", onset, 3440, "in:0.3", "short:0.4")},
				{ms: 4120, ev: candidate(4120), want: []string{"duck 2 -12"}},
				{ms: 4270, ev: sound(4120, SoundVoice, 150, "he:0.07", "first:1", "time:0.5"), want: []string{"interrupt 2"}},
				{ms: 4300, ev: stopped(2)},
				{ms: 4310, ev: reply(2, "Once upon a time.", true), want: []string{`agent-cut 2 "Once upon a time."`}},
				{ms: 4560, ev: dropped(), want: []string{`user 3 "in short"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "a piece kept as a backchannel opens the transcript of the voice that went on with it and interrupted",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "go:0.21", "for:1")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3440, ev: ended(voice(3440, "go:0.21", "for:0.55", "were:0.16"), 3440), want: []string{"unduck 2"}},
				{ms: 3520, ev: speechEnd(3440)},
				{ms: 3600, ev: final(ended(voice(3440, "go:0.23", "for:0.52", "what:0.31"), 3440))},
				{ms: 3900, ev: timedUtterance("in short", onset, 3440, "in:0.3", "short:0.4")},
				{ms: 4120, ev: candidate(4120), want: []string{"duck 2 -12"}},
				{ms: 4270, ev: sound(4120, SoundVoice, 150, "he:0.07", "first:1")},
				{ms: 4340, ev: speechStart(4120)},
				{ms: 4400, ev: sound(4120, SoundVoice, 280, "ten:0.9", "meters:0.9")},
				{ms: 4440, ev: sound(4120, SoundVoice, 320, "ten:0.9", "meters:0.9")},
				{ms: 4480, ev: sound(4120, SoundVoice, 360, "ten:0.9", "meters:0.9"), want: []string{"interrupt 2"}},
				{ms: 4500, ev: stopped(2)},
				{ms: 4510, ev: reply(2, "Once upon a time.", true), want: []string{`agent-cut 2 "Once upon a time."`}},
				{ms: 4700, ev: speechEnd(4650)},
				{ms: 5100, ev: utterance("ten meters"), want: []string{`user 3 "in short ten meters"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "a piece the overlap module took for a backchannel word opens the transcript of the voice that went on with it and interrupted",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3180, ev: voice(3180, "sure:1")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3340, ev: ended(voice(3340, "sure:0.32"), 3340), want: []string{"unduck 2"}},
				{ms: 3520, ev: speechEnd(3340)},
				{ms: 3560, ev: final(ended(voice(3340, "sure:0.32"), 3340))},
				{ms: 3600, ev: timedUtterance("turn", onset, 3340, "turn:0.9")},
				{ms: 3920, ev: candidate(3920), want: []string{"duck 2 -12"}},
				{ms: 4060, ev: sound(3920, SoundVoice, 140, "by:1")},
				{ms: 4100, ev: sound(3920, SoundVoice, 180, "by:1")},
				{ms: 4140, ev: speechStart(3920)},
				{ms: 4140, ev: sound(3920, SoundVoice, 220, "by:0.05"), want: []string{"interrupt 2"}},
				{ms: 4160, ev: stopped(2)},
				{ms: 4170, ev: reply(2, "Once upon a time.", true), want: []string{`agent-cut 2 "Once upon a time."`}},
				{ms: 4500, ev: speechEnd(4460)},
				{ms: 4700, ev: utterance("off"), want: []string{`user 3 "turn off"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "a long voice heard in pieces, its words unsure, is a turn after the agent's, not a backchannel",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3120, ev: voice(3120, "go:1")},
				{ms: 3200, ev: ended(voice(3200, "go:0.1"), 3180), want: []string{"unduck 2"}},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3300, ev: voice(3300, "go:0.1"), want: []string{"duck 2 -12"}},
				{ms: 3640, ev: ended(voice(3640, "uh-huh:1"), 3620), want: []string{"unduck 2"}},
				{ms: 3700, ev: voice(3700, "over:1"), want: []string{"duck 2 -12"}},
				{ms: 4000, ev: ended(voice(4000, "or:0.19", "were:0.09"), 3980), want: []string{"unduck 2"}},
				{ms: 4530, ev: speechEnd(4530)},
				{ms: 4540, ev: final(ended(voice(4200, "our:0.21", "pardon:0.07", "can:0.12"), 3980))},
				{ms: 5300, ev: spanUtterance(onset, 4530, "or work and", "or:0.3", "work:0.2", "and:0.4")},
				{ms: 5400, ev: reply(2, "Once upon a time.", false)},
				{ms: 5410, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `user 3 "or work and"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "a long hum whose transcript is letters and one word stays a backchannel",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "an:0.4")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3700, ev: ended(voice(3700, "an:0.3", "make:0.9"), 3690), want: []string{"unduck 2"}},
				{ms: 4310, ev: speechEnd(4310)},
				{ms: 4320, ev: final(ended(voice(4300, "an:0.3", "an:0.5", "make:0.9"), 3690))},
				{ms: 5300, ev: spanUtterance(onset, 4310, "an an h m m", "an:0.6", "an:0.2", "h:0.4", "m:0.5", "m:0.5")},
				{ms: 5400, ev: reply(2, "Once upon a time.", false)},
				{ms: 5410, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `backchannel 2 "mm-hmm" voice`}},
			}),
			final: SilenceAfterAgent,
		},
		{
			name: "a long voice whose every word the recogniser doubts is a turn after the agent's",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "look:0.08", "how:0.24")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3880, ev: voice(3880, "look:0.08", "hang:0.05", "on:0.99", "us:1")},
				{ms: 4240, ev: voice(4240, "look:0.07", "hang:0.08", "on:0.99", "a:0.57", "second:1")},
				{ms: 4280, ev: voice(4280, "look:0.07", "hang:0.08", "on:1", "a:0.56", "second:1")},
				{ms: 4340, ev: ended(voice(4320, "look:0.08", "hang:0.09", "on:1", "a:0.56", "second:1"), 4330), want: []string{"unduck 2"}},
				{ms: 4620, ev: speechEnd(4380)},
				{ms: 4620, ev: final(ended(voice(4320, "look:0.08", "hang:0.09", "on:1", "a:0.56", "second:1"), 4330))},
				{ms: 4660, ev: spanUtterance(onset, 4380, "come down in seconds", "come:0.04", "down:0.38", "in:0.05", "seconds:0.08")},
				{ms: 5400, ev: reply(2, "Once upon a time.", false)},
				{ms: 5410, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `user 3 "come down in seconds"`, "respond 4"}},
			}),
			final: SilenceAfterUser,
		},
		{
			name: "a long hum whose transcript holds one real word stays a backchannel, whatever its decodes settled on",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3100, ev: voice(3100, "am:1")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 4060, ev: voice(4060, "an:0.30", "an:0.53", "make:0.90", "yeah:0.57", "them:0.45")},
				{ms: 4100, ev: voice(4100, "an:0.29", "an:0.51", "make:0.90", "yeah:0.57", "them:0.45")},
				{ms: 4120, ev: ended(voice(4120, "an:0.29", "an:0.50", "make:0.90", "yeah:0.57", "them:0.49"), 4110), want: []string{"unduck 2"}},
				{ms: 4320, ev: speechEnd(4110)},
				{ms: 4320, ev: final(ended(voice(4120, "an:0.29", "an:0.50", "make:0.90", "yeah:0.57", "them:0.49"), 4110))},
				{ms: 5300, ev: spanUtterance(onset, 4110, "an an h m m", "an:0.6", "an:0.2", "h:0.4", "m:0.5", "m:0.5")},
				{ms: 5400, ev: reply(2, "Once upon a time.", false)},
				{ms: 5410, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`, `backchannel 2 "yeah" voice`}},
			}),
			final: SilenceAfterAgent,
		},
		{
			name: "a knock the recogniser gives a word to leaves no trace",
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"duck 2 -12"}},
				{ms: 3100, ev: sound(onset, SoundNoise, 100, "the:0.9")},
				{ms: 3260, ev: speechStart(onset)},
				{ms: 3300, ev: ended(sound(onset, SoundNoise, 250, "the:0.9"), 3250), want: []string{"unduck 2"}},
				{ms: 3450, ev: speechEnd(3250)},
				{ms: 3460, ev: final(ended(sound(onset, SoundNoise, 250, "the:0.9"), 3250))},
				{ms: 4100, ev: scoredUtterance("the", "the:0.9"), want: []string{"noise 2"}},
				{ms: 4300, ev: reply(2, "Once upon a time.", false)},
				{ms: 4310, ev: queued(2, true)},
				{ms: 6000, ev: finished(2), want: []string{`agent 2 "Once upon a time."`}},
			}),
			final: SilenceAfterAgent,
		},
		{
			name: "evidence without a candidate begins a barge-in",
			steps: concat(speakingAgent(), []step{
				{ms: 3100, ev: voice(3100), want: []string{"duck 2 -12"}},
				{ms: 3160, ev: voice(3160, "wait:1")},
				{ms: 3260, ev: voice(3260, "wait:1"), want: []string{"interrupt 2"}},
			}),
			final: Overlap,
		},
		{
			// The agent became audible at 2000 ms (speakingAgent).
			name: "a voice that begins as the agent does interrupts once it sounds like a voice",
			steps: concat(speakingAgent(), []step{
				{ms: 2230, ev: candidate(2150), want: []string{"duck 2 -12"}},
				{ms: 2260, ev: sound(2150, SoundUnknown, 0)},
				{ms: 2280, ev: sound(2150, SoundVoice, 110), want: []string{"interrupt 2, the user's turn"}},
			}),
			final: Overlap,
		},
		{
			name: "a hum that begins as the agent does interrupts too",
			steps: concat(speakingAgent(), []step{
				{ms: 2100, ev: candidate(2050), want: []string{"duck 2 -12"}},
				{ms: 2160, ev: sound(2050, SoundHum, 110), want: []string{"interrupt 2, the user's turn"}},
			}),
			final: Overlap,
		},
		{
			name: "a cough as the agent begins does not interrupt",
			steps: concat(speakingAgent(), []step{
				{ms: 2100, ev: candidate(2050), want: []string{"duck 2 -12"}},
				{ms: 2160, ev: sound(2050, SoundNoise, 110)},
				{ms: 2300, ev: ended(sound(2050, SoundNoise, 250), 2300), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "a voice past the yield window is weighed as any other",
			steps: concat(speakingAgent(), []step{
				{ms: 2330, ev: candidate(2260), want: []string{"duck 2 -12"}},
				{ms: 2380, ev: sound(2260, SoundVoice, 120)},
				{ms: 2420, ev: sound(2260, SoundVoice, 160, "yeah:0.9")},
				{ms: 2460, ev: sound(2260, SoundVoice, 200, "yeah:0.95"), want: []string{"unduck 2"}},
			}),
			final: AgentSpeaking,
		},
		{
			name: "without the rule, a voice as the agent begins is weighed as any other",
			cfg:  func(c *Config) { c.BargeIn.YieldWindow = 0 },
			steps: concat(speakingAgent(), []step{
				{ms: 2230, ev: candidate(2150), want: []string{"duck 2 -12"}},
				{ms: 2280, ev: sound(2150, SoundVoice, 110)},
			}),
			final: AgentSpeaking,
		},
		{
			name: "pausing instead of ducking, with evidence",
			cfg:  func(c *Config) { c.BargeIn.Hold = HoldPause },
			steps: concat(speakingAgent(), []step{
				{ms: 3030, ev: candidate(onset), want: []string{"pause 2"}},
				{ms: 3160, ev: voice(3160, "yeah:1")},
				{ms: 3220, ev: voice(3220, "yeah:1"), want: []string{"resume 2"}},
			}),
			final: AgentSpeaking,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			policy := New(cfg, dialogue.AlignOptions{})
			for i, s := range tt.steps {
				var acts []Action
				if s.tick {
					acts = policy.Tick(at(s.ms))
				} else {
					s.ev.At = at(s.ms)
					acts = policy.Handle(s.ev)
				}
				got := describeSoft(acts)
				if strings.Join(got, "; ") != strings.Join(s.want, "; ") {
					t.Fatalf("step %d at %d ms: actions %q, want %q", i, s.ms, got, s.want)
				}
				if d := policy.Deadline(); !d.IsZero() && !d.After(at(s.ms)) && !s.tick {
					// A deadline already passed would wake the module at once, for nothing.
					acts := policy.Tick(at(s.ms))
					if len(describeSoft(acts)) > 0 {
						t.Fatalf("step %d at %d ms: a passed deadline %v acts: %q", i, s.ms, d, describeSoft(acts))
					}
					if d2 := policy.Deadline(); !d2.IsZero() && !d2.After(at(s.ms)) {
						t.Fatalf("step %d at %d ms: the deadline stays in the past (%v)", i, s.ms, d2)
					}
				}
			}
			if policy.State() != tt.final {
				t.Errorf("final state %v, want %v", policy.State(), tt.final)
			}
		})
	}
}
