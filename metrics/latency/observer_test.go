package latency

import (
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/hold"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/manager"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/vad"
)

var t0 = time.Unix(1000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// TestObserver feeds the observer the IUs of two exchanges, the first with a
// barge-in that a noise candidate precedes, in the order the modules send them, and
// checks every time it takes from them.
func TestObserver(t *testing.T) {
	var reported []metrics.Turn
	o := New(Options{Origin: t0, OnTurn: func(m metrics.Turn) { reported = append(reported, m) }})
	seq := 0
	send := func(from string, ms int, typ iu.UpdateType, p iu.Payload) {
		seq++
		u := iu.IU{ID: iu.ID(from + "/" + string(rune('a'+seq))), Payload: p, Created: at(ms)}
		o.Observe(at(ms), iu.Message{From: from, Updates: []iu.Update{{Type: typ, IU: u}}})
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	chunk := func(turn int) tts.Chunk {
		return tts.Chunk{TurnID: turn, Audio: audio.Frame{Rate: 22050, Channels: 1, Samples: make([]float32, 441)}}
	}
	progress := func(turn int, state speaker.State, pos int, tail bool) speaker.Progress {
		return speaker.Progress{State: state, Heard: "tts/1", Item: chunk(turn), Offset: 100, Length: 441, Pos: ms(pos), Tail: tail}
	}

	// Exchange 1: the user stops at 1000 ms, the end of turn comes at 1700, the
	// utterance at 1750, and the agent's turn 2 is asked for at once.
	send("vad", 1700, iu.Add, vad.EndOfTurn{SpeechEnd: ms(1000)})
	send("asr", 1750, iu.Add, asr.Utterance{Text: "tell me a story"})
	send("manager", 1750, iu.Add, manager.AgentTurn{TurnID: 2, InReplyTo: 1})
	send("manager", 1750, iu.Add, control.Command{Action: control.Respond, TurnID: 2})
	send("llm", 1800, iu.Add, llm.Clause{TurnID: 2, ClauseID: 0, Text: "Once"})
	send("llm", 1900, iu.Commit, llm.Clause{TurnID: 2, ClauseID: 0, Text: "Once upon a time,"})
	send("hold", 1950, iu.Commit, hold.Clause{Clause: llm.Clause{TurnID: 2, ClauseID: 0, Text: "Once upon a time,"}}) // not the LLM's
	send("tts", 1910, iu.Add, chunk(2))
	send("tts", 1920, iu.Add, chunk(2)) // not the first
	send("speaker", 2000, iu.Add, progress(2, speaker.Playing, 2000, false))
	send("manager", 2000, iu.UpdatePayload, manager.AgentTurn{TurnID: 2, InReplyTo: 1, Heard: true, Start: ms(2000), End: ms(2000)})
	send("speaker", 2100, iu.Add, progress(2, speaker.Playing, 2100, false))
	send("manager", 2100, iu.UpdatePayload, manager.AgentTurn{TurnID: 2, InReplyTo: 1, Text: "Once", Heard: true, Start: ms(2000), End: ms(2100)})
	// A candidate that is noise pauses the agent; its pause is not a barge-in.
	send("vad", 2500, iu.Add, vad.Candidate{Start: ms(2480)})
	send("speaker", 2510, iu.Add, progress(2, speaker.Paused, 2550, true))
	send("vad", 2600, iu.Revoke, vad.Candidate{Start: ms(2480)})
	// Then real speech: the candidate at 2980, confirmed, and the output falls silent
	// at 3100 (the device's tail).
	send("vad", 3000, iu.Add, vad.Candidate{Start: ms(2980)})
	send("speaker", 3010, iu.Add, progress(2, speaker.Paused, 3100, true))
	send("vad", 3230, iu.Commit, vad.Candidate{Start: ms(2980)})
	send("vad", 3230, iu.Add, vad.Segment{Start: ms(2980)})
	send("speaker", 3300, iu.Add, progress(2, speaker.Stopped, 3300, false))
	send("manager", 3400, iu.Commit, manager.AgentTurn{TurnID: 2, InReplyTo: 1, Interrupted: true, Closed: true, Stored: true})
	// Exchange 2, without a barge-in.
	send("vad", 5700, iu.Add, vad.EndOfTurn{SpeechEnd: ms(5000)})
	send("asr", 5710, iu.Add, asr.Utterance{Text: "go on"})
	send("manager", 5710, iu.Add, manager.AgentTurn{TurnID: 4, InReplyTo: 3})
	send("manager", 5710, iu.Add, control.Command{Action: control.Respond, TurnID: 4})
	send("llm", 5720, iu.Add, llm.Clause{TurnID: 4, ClauseID: 0, Text: "And"})
	send("llm", 5730, iu.Commit, llm.Clause{TurnID: 4, ClauseID: 0, Text: "And then."})
	send("tts", 5740, iu.Add, chunk(4))
	send("speaker", 5800, iu.Add, progress(4, speaker.Playing, 5800, false))
	send("manager", 5800, iu.UpdatePayload, manager.AgentTurn{TurnID: 4, InReplyTo: 3, Heard: true, Start: ms(5800), End: ms(5800)})
	send("manager", 7000, iu.Commit, manager.AgentTurn{TurnID: 4, InReplyTo: 3, Closed: true, Stored: true})
	// A re-engagement: no exchange of its own.
	send("manager", 12000, iu.Add, manager.AgentTurn{TurnID: 5, Fixed: true, FullText: "Still there?"})
	send("manager", 12000, iu.Add, tts.Text{TurnID: 5, Text: "Still there?"})
	send("speaker", 12100, iu.Add, progress(5, speaker.Playing, 12100, false))
	send("manager", 12100, iu.UpdatePayload, manager.AgentTurn{TurnID: 5, Fixed: true, FullText: "Still there?", Heard: true, Start: ms(12100), End: ms(12100)})
	send("manager", 13000, iu.Commit, manager.AgentTurn{TurnID: 5, Fixed: true, Closed: true, Stored: true})

	want := []metrics.Turn{
		{UserTurn: 1, AgentTurn: 2, UserSpeechEnd: at(1000), EndOfTurn: at(1700), ASRFinal: at(1750), Respond: at(1750),
			FirstToken: at(1800), FirstClause: at(1900), FirstChunk: at(1910), FirstAudible: at(2000),
			BargeInOnset: at(2980), AudioSilent: at(3100), Interrupted: true},
		{UserTurn: 3, AgentTurn: 4, UserSpeechEnd: at(5000), EndOfTurn: at(5700), ASRFinal: at(5710), Respond: at(5710),
			FirstToken: at(5720), FirstClause: at(5730), FirstChunk: at(5740), FirstAudible: at(5800)},
	}
	got := o.Turns()
	if len(got) != len(want) || len(reported) != len(want) {
		t.Fatalf("%d exchanges (%d reported), want %d: %+v", len(got), len(reported), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] || reported[i] != want[i] {
			t.Errorf("exchange %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if l := got[0].Latencies(); l[metrics.VoiceToVoice] != ms(1000) || l[metrics.BargeIn] != ms(120) || l[metrics.ASRFinal] != ms(50) {
		t.Errorf("latencies %v", l)
	}
}

// TestObserverCountsStreamTimesFromTheMicrophonesFirstSample: a microphone opens
// after the network started; the user's stream times count from its first captured
// sample, so that voice-to-voice is not read too long by the device's opening time.
func TestObserverCountsStreamTimesFromTheMicrophonesFirstSample(t *testing.T) {
	o := New(Options{Origin: t0})
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	send := func(from string, at time.Time, typ iu.UpdateType, p iu.Payload) {
		o.Observe(at, iu.Message{From: from, Updates: []iu.Update{{Type: typ, IU: iu.IU{ID: "x/1", Payload: p, Created: at}}}})
	}
	// The microphone's frame at stream position 320 (20 ms) was captured 100 ms after
	// the network started: its stream began 80 ms after the network.
	send("input", at(100), iu.Add, audio.Frame{Rate: 16000, Channels: 1, Start: 320, Captured: at(100), Samples: make([]float32, 320)})
	send("vad", at(1700), iu.Add, vad.EndOfTurn{SpeechEnd: ms(1000)})
	send("asr", at(1750), iu.Add, asr.Utterance{Text: "hello"})
	send("manager", at(1750), iu.Add, manager.AgentTurn{TurnID: 2, InReplyTo: 1})
	send("manager", at(1750), iu.Add, control.Command{Action: control.Respond, TurnID: 2})
	chunk := tts.Chunk{TurnID: 2, Audio: audio.Frame{Rate: 22050, Channels: 1, Samples: make([]float32, 441)}}
	send("speaker", at(2000), iu.Add, speaker.Progress{State: speaker.Playing, Heard: "tts/1", Item: chunk, Length: 441, Pos: ms(2000)})
	send("manager", at(2000), iu.UpdatePayload, manager.AgentTurn{TurnID: 2, InReplyTo: 1, Heard: true, Start: ms(2000), End: ms(2000)})
	send("manager", at(2500), iu.Commit, manager.AgentTurn{TurnID: 2, InReplyTo: 1, Closed: true, Stored: true})
	got := o.Turns()
	if len(got) != 1 {
		t.Fatalf("%d exchanges, want 1", len(got))
	}
	if v := got[0].Latencies()[metrics.VoiceToVoice]; v != ms(920) {
		t.Errorf("voice-to-voice %v, want 920ms (speech ended at 1080 ms on the clock)", v)
	}
}

// TestObserverTimesAPreparedReply: a reply prepared while the user paused has its
// first clause and chunk before the Respond that confirms it; they count from the
// preparation that was confirmed (not one the changed words withdrew), the LLM took no
// time after the Respond, and the TTS's first chunk counts from the prepared clause.
func TestObserverTimesAPreparedReply(t *testing.T) {
	o := New(Options{Origin: t0})
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	send := func(from, id string, ms int, typ iu.UpdateType, p iu.Payload, groundedIn ...iu.ID) {
		o.Observe(at(ms), iu.Message{From: from, Updates: []iu.Update{{Type: typ, IU: iu.IU{ID: iu.ID(id), Payload: p, Created: at(ms), GroundedIn: groundedIn}}}})
	}
	chunk := tts.Chunk{TurnID: 2, Audio: audio.Frame{Rate: 22050, Channels: 1, Samples: make([]float32, 441)}}
	// A first preparation, withdrawn when the words changed; its clause's late update,
	// and a chunk of it the TTS made before it heard of the withdrawal, must not count
	// for the second.
	send("manager", "manager/1", 1200, iu.Add, control.Command{Action: control.Prepare, TurnID: 2})
	send("llm", "llm/1", 1210, iu.Add, llm.Clause{TurnID: 2, Text: "It"}, "manager/1")
	send("manager", "manager/2", 1250, iu.Add, control.Command{Action: control.Withdraw, TurnID: 2})
	send("manager", "manager/3", 1250, iu.Add, control.Command{Action: control.Prepare, TurnID: 2})
	send("llm", "llm/1", 1260, iu.UpdatePayload, llm.Clause{TurnID: 2, Text: "It is late.", Prepared: true}, "manager/1")
	// The first preparation's generation, not told of the withdrawal yet, still adds a
	// first clause.
	send("llm", "llm/0", 1270, iu.Add, llm.Clause{TurnID: 2, ClauseID: 0, Text: "It"}, "manager/1")
	send("llm", "llm/2", 1300, iu.Add, llm.Clause{TurnID: 2, Text: "Ten"}, "manager/3")
	send("tts", "tts/0", 1310, iu.Add, chunk, "llm/1")
	send("llm", "llm/2", 1400, iu.UpdatePayload, llm.Clause{TurnID: 2, Text: "Ten o'clock.", Prepared: true}, "manager/3")
	send("tts", "tts/1", 1402, iu.Add, chunk, "llm/2")
	// The turn ends with the prepared words.
	send("vad", "turn-end/1", 1500, iu.Add, vad.EndOfTurn{SpeechEnd: ms(1000)})
	send("asr", "asr/1", 1500, iu.Add, asr.Utterance{Text: "what time is it"})
	send("manager", "manager/6", 1501, iu.Add, manager.AgentTurn{TurnID: 2, InReplyTo: 1})
	send("manager", "manager/4", 1501, iu.Add, control.Command{Action: control.Respond, TurnID: 2})
	send("llm", "llm/2", 1502, iu.Commit, llm.Clause{TurnID: 2, Text: "Ten o'clock.", Prepared: true}, "manager/3")
	send("tts", "tts/2", 1503, iu.Add, chunk, "llm/2")
	send("speaker", "speaker/1", 1560, iu.Add, speaker.Progress{State: speaker.Playing, Heard: "tts/1", Item: chunk, Length: 441, Pos: ms(1560)})
	send("manager", "manager/6", 1560, iu.UpdatePayload, manager.AgentTurn{TurnID: 2, InReplyTo: 1, Heard: true, Start: ms(1560), End: ms(1560)})
	send("manager", "manager/6", 2500, iu.Commit, manager.AgentTurn{TurnID: 2, InReplyTo: 1, Closed: true, Stored: true})
	got := o.Turns()
	if len(got) != 1 {
		t.Fatalf("%d exchanges, want 1", len(got))
	}
	tr := got[0]
	if !tr.Prepared || tr.FirstToken != at(1300) || tr.FirstClause != at(1400) || tr.FirstChunk != at(1402) {
		t.Errorf("prepared %v, first token %v, clause %v, chunk %v; want true, 1300, 1400, 1402 ms",
			tr.Prepared, tr.FirstToken.Sub(t0), tr.FirstClause.Sub(t0), tr.FirstChunk.Sub(t0))
	}
	want := map[string]time.Duration{metrics.LLMFirstToken: 0, metrics.LLMFirstClause: 0, metrics.TTSFirstChunk: ms(2), metrics.VoiceToVoice: ms(560)}
	l := tr.Latencies()
	for name, w := range want {
		if v, ok := l[name]; !ok || v != w {
			t.Errorf("%s = %v (measured %v), want %v", name, v, ok, w)
		}
	}
}
