package metrics

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestLatencies(t *testing.T) {
	base := time.Unix(100, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	turn := Turn{
		UserTurn: 1, AgentTurn: 2,
		UserSpeechEnd: at(0), EndOfTurn: at(700), ASRFinal: at(760), Respond: at(765),
		FirstToken: at(900), FirstClause: at(1100), FirstChunk: at(1150), FirstAudible: at(1250),
		BargeInOnset: at(3000), AudioSilent: at(3040),
	}
	want := map[string]time.Duration{
		VoiceToVoice: 1250 * time.Millisecond, ASRFinal: 60 * time.Millisecond,
		LLMFirstToken: 135 * time.Millisecond, LLMFirstClause: 335 * time.Millisecond,
		TTSFirstChunk: 50 * time.Millisecond, BargeIn: 40 * time.Millisecond,
	}
	got := turn.Latencies()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	// Unknown steps give no latency rather than a bogus one.
	if _, ok := (Turn{UserSpeechEnd: at(5)}).Latencies()[VoiceToVoice]; ok {
		t.Error("voice-to-voice without a first audible time")
	}
	data, err := json.Marshal(turn)
	if err != nil || !strings.Contains(string(data), `"voice_to_voice":1250`) {
		t.Errorf("json %s, %v", data, err)
	}
}

func TestPercentiles(t *testing.T) {
	tests := []struct {
		in       []int
		p50, p90 int
	}{
		{[]int{5}, 5, 5},
		{[]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 5, 9},
		{[]int{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}, 5, 9},
		{[]int{100, 200}, 100, 200},
	}
	for _, tt := range tests {
		var d []time.Duration
		for _, v := range tt.in {
			d = append(d, time.Duration(v)*time.Millisecond)
		}
		s := Of(d)
		if s.P50 != time.Duration(tt.p50)*time.Millisecond || s.P90 != time.Duration(tt.p90)*time.Millisecond || s.N != len(tt.in) {
			t.Errorf("Of(%v) = %+v, want p50 %d p90 %d", tt.in, s, tt.p50, tt.p90)
		}
	}
	if (Of(nil) != Stats{}) {
		t.Error("Of(nil) should be zero")
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	WriteTable(&buf, "incremental", Summarize([]Turn{{UserSpeechEnd: time.Unix(0, 0), FirstAudible: time.Unix(1, 0)}}))
	if !strings.Contains(buf.String(), "voice_to_voice") || !strings.Contains(buf.String(), "1000 ms") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// TestVirtualClockLatencies: on a virtual clock the computation-only latencies are
// unmeasured, not zero: left out of Latencies, listed by Unmeasured, summarised without
// statistics, shown as "—" and written as "unmeasured" in JSON; the others stay.
func TestVirtualClockLatencies(t *testing.T) {
	base := time.Unix(100, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	// Computation took no time: the steps after the end of turn share its instant.
	turn := Turn{
		UserTurn: 1, AgentTurn: 2, VirtualClock: true,
		UserSpeechEnd: at(0), EndOfTurn: at(700), ASRFinal: at(700), Respond: at(700),
		FirstToken: at(700), FirstClause: at(700), FirstChunk: at(700), FirstAudible: at(750),
		BargeInOnset: at(3000), AudioSilent: at(3128),
	}
	lat := turn.Latencies()
	if len(lat) != 2 || lat[VoiceToVoice] != 750*time.Millisecond || lat[BargeIn] != 128*time.Millisecond {
		t.Errorf("latencies %v, want voice-to-voice and barge-in only", lat)
	}
	if got := strings.Join(turn.Unmeasured(), ","); got != "asr_final,llm_first_token,llm_first_clause,tts_first_chunk" {
		t.Errorf("unmeasured %q", got)
	}
	// A step that did not happen is neither measured nor unmeasured.
	noBarge := turn
	noBarge.BargeInOnset, noBarge.AudioSilent, noBarge.FirstChunk = time.Time{}, time.Time{}, time.Time{}
	if got := strings.Join(noBarge.Unmeasured(), ","); got != "asr_final,llm_first_token,llm_first_clause" {
		t.Errorf("unmeasured without a first chunk: %q", got)
	}
	if real := (Turn{EndOfTurn: at(700), ASRFinal: at(700)}); real.Latencies()[ASRFinal] != 0 || real.Unmeasured() != nil {
		t.Error("on a real clock a zero latency is a measurement")
	}

	sum := Summarize([]Turn{turn, noBarge})
	if s := sum[ASRFinal]; !s.Unmeasured || s.N != 2 {
		t.Errorf("asr_final summary %+v", s)
	}
	if s := sum[VoiceToVoice]; s.Unmeasured || s.N != 2 || s.P50 != 750*time.Millisecond {
		t.Errorf("voice_to_voice summary %+v", s)
	}
	var table bytes.Buffer
	WriteTable(&table, "latencies (virtual clock)", sum)
	for _, want := range []string{"voice_to_voice         2    750 ms", "asr_final              2         —         —         —", "tts_first_chunk        1         —",
		"computation takes no time on a virtual clock"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if strings.Contains(table.String(), " 0 ms") {
		t.Errorf("table shows a zero latency:\n%s", table.String())
	}
	data, err := json.Marshal(struct {
		Turns   []Turn           `json:"turns"`
		Summary map[string]Stats `json:"summary"`
	}{[]Turn{turn}, sum})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"asr_final":{"n":2,"unmeasured":true}`, `"virtual_clock":true`, `"unmeasured":["asr_final","llm_first_token","llm_first_clause","tts_first_chunk"]`, `"latency_ms":{"barge_in_reaction":128,"voice_to_voice":750}`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("JSON lacks %s:\n%s", want, data)
		}
	}
}
