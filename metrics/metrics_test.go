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
