package replaytest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/pipeline/internal/pipetest"
	"github.com/parley-voice/parley/turntaking"
)

func TestReplayTwoTurnsGetTwoReplies(t *testing.T) {
	cfg := pipetest.DemoConfig(t)
	shared := testenv.SharedDir(t)
	scenario := pipetest.WriteScenario(t, 3,
		filepath.Join(shared, "audio", "v2j_what_time_is_it.wav"), 0.5,
		filepath.Join(shared, "audio", "v2j_turn_on_living_room_lamp.wav"), 12.0)
	res, _ := pipetest.RunReplay(t, cfg, scenario)
	var got []string
	for _, u := range res.History.Utterances() {
		got = append(got, fmt.Sprintf("%s %d", u.Speaker, u.TurnID))
		if strings.TrimSpace(u.Text) == "" || u.Interrupted {
			t.Errorf("utterance %+v: empty or interrupted", u)
		}
	}
	if want := "user 1, agent 2, user 3, agent 4"; strings.Join(got, ", ") != want {
		t.Fatalf("history %q, want %q", strings.Join(got, ", "), want)
	}
	if !strings.Contains(res.History.Utterances()[0].Text, "time") {
		t.Errorf("pocketsphinx heard %q for \"what time is it\"", res.History.Utterances()[0].Text)
	}
	// The saved session holds the same conversation.
	loaded, err := dialogue.LoadSession(res.SessionDir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(loaded.History.Utterances()); n != 4 {
		t.Errorf("saved session has %d utterances, want 4", n)
	}
	for _, name := range []string{"heard.wav", "agent.wav", "user.wav", "transcript.txt", "timeline.jsonl", "timeline.svg", "metrics.json"} {
		if st, err := os.Stat(filepath.Join(res.OutDir, name)); err != nil || st.Size() == 0 {
			t.Errorf("replay output %s missing or empty", name)
		}
	}
}

func TestReplayBargeInKeepsExactlyTheWordsHeard(t *testing.T) {
	cfg := pipetest.DemoConfig(t)
	cfg.Dialogue.MinWordFraction = 1 // whole words only, so the reference is unambiguous
	shared := testenv.SharedDir(t)
	scenario := pipetest.WriteScenario(t, 3,
		filepath.Join(shared, "audio", "v2j_what_time_is_it.wav"), 0.5,
		filepath.Join(shared, "audio", "goforward.wav"), 4.0)
	res, rec, console := pipetest.RunReplayConsole(t, cfg, scenario)

	agents := pipetest.AgentUtterances(res.History)
	pipetest.CheckConsoleShowsHistory(t, console, res.History)
	if len(agents) < 2 {
		t.Fatalf("history %+v: want the interrupted turn and the reply to the barge-in", res.History.Utterances())
	}
	cut := agents[0]
	if !cut.Interrupted {
		t.Fatalf("agent turn %d was not interrupted: %+v", cut.TurnID, cut)
	}
	want := pipetest.HeardText(t, rec, cut.TurnID)
	if cut.Text != want {
		t.Errorf("stored agent turn %q, but the speaker's record says the listener heard %q (generated: %q)", cut.Text, want, cut.FullText)
	}
	if cut.Text == "" || cut.Text == strings.TrimSpace(cut.FullText) {
		t.Errorf("stored %q of %q: the cut should keep a real, strict prefix", cut.Text, cut.FullText)
	}
	// The user's barge-in became the next user turn, answered by the agent.
	var order []string
	for _, u := range res.History.Utterances() {
		order = append(order, fmt.Sprintf("%s %d", u.Speaker, u.TurnID))
	}
	if want := "user 1, agent 2, user 3, agent 4"; strings.Join(order, ", ") != want {
		t.Errorf("history %q, want %q", strings.Join(order, ", "), want)
	}
	// What the speaker wrote is what it reported: the agent's audio stops where the
	// speaker said the output fell silent (the pause at the user's onset; Pos includes
	// the tail the device still played), and not before.
	var stopPos time.Duration
	for _, pr := range rec.Reports {
		if c, ok := pr.Item.(tts.Chunk); ok && c.TurnID == cut.TurnID && (pr.State == speaker.Paused || pr.State == speaker.Stopped) {
			stopPos = pr.Pos
			break
		}
	}
	agentAudio, err := audio.DecodeWAVFile(filepath.Join(res.OutDir, "agent.wav"))
	if err != nil {
		t.Fatal(err)
	}
	from := int(audio.DurationToSamples(stopPos, agentAudio.Rate))
	to := min(from+int(audio.DurationToSamples(300*time.Millisecond, agentAudio.Rate)), agentAudio.Len())
	if from >= to {
		t.Fatalf("stop at %v lies beyond the agent audio (%v)", stopPos, agentAudio.Duration())
	}
	if rms := audio.RMS(agentAudio.Samples[from:to]); rms > 1e-4 {
		t.Errorf("agent audio after the reported stop at %v has RMS %g: the listener heard more than reported", stopPos, rms)
	}
	before := int(audio.DurationToSamples(stopPos-400*time.Millisecond, agentAudio.Rate))
	if rms := audio.RMS(agentAudio.Samples[max(before, 0):from]); rms < 1e-3 {
		t.Errorf("agent audio before the reported stop is silent (RMS %g)", rms)
	}
}

func TestReplayBackchannelDoesNotInterrupt(t *testing.T) {
	cfg := pipetest.DemoConfig(t)
	shared := testenv.SharedDir(t)
	scenario := pipetest.WriteScenario(t, 3,
		filepath.Join(shared, "audio", "v2j_what_time_is_it.wav"), 0.5,
		pipetest.Backchannel(t), 3.6)
	res, rec := pipetest.RunReplay(t, cfg, scenario)

	var order []string
	for _, w := range rec.Words {
		t.Logf("asr: %s", w)
	}
	for _, u := range res.History.Utterances() {
		kind := u.Speaker.String()
		if u.Backchannel {
			kind = "backchannel"
		}
		order = append(order, fmt.Sprintf("%s %d %q", kind, u.TurnID, u.Text))
		if u.Interrupted {
			t.Errorf("turn %d was interrupted by a backchannel", u.TurnID)
		}
	}
	// The question, the whole answer, and the "yeah" kept as a backchannel after the
	// answer: no user turn.
	if len(order) != 3 || !strings.HasPrefix(order[2], `backchannel 2 "yeah"`) {
		t.Fatalf("history %q: want the question, the whole answer and the backchannel", order)
	}
	var ducked, unducked bool
	for _, c := range rec.Commands {
		t.Logf("command: %s", c.Summary())
		ducked = ducked || c.Action == control.Duck
		unducked = unducked || c.Action == control.Unduck
		if c.Action == control.Interrupt || c.Action == control.Pause {
			t.Errorf("the manager stopped the agent: %+v", c)
		}
	}
	if !ducked || !unducked {
		t.Errorf("ducked %v, unducked %v: the agent's voice should soften at the user's sound and come back after the backchannel", ducked, unducked)
	}
}

func TestReplayReengagesAfterSilence(t *testing.T) {
	cfg := pipetest.DemoConfig(t)
	cfg.TurnTaking.Reengage = turntaking.ReengageConfig{After: 4 * time.Second, Text: "Are you still there?", Max: 1}
	shared := testenv.SharedDir(t)
	scenario := pipetest.WriteScenario(t, 12, filepath.Join(shared, "audio", "v2j_what_time_is_it.wav"), 0.5)
	res, _ := pipetest.RunReplay(t, cfg, scenario)
	var got []string
	for _, u := range res.History.Utterances() {
		got = append(got, fmt.Sprintf("%s %d %q", u.Speaker, u.TurnID, u.Text))
	}
	if len(got) != 3 || !strings.HasSuffix(got[2], `"Are you still there?"`) {
		t.Fatalf("history %q: want the question, the answer and one re-engagement", got)
	}
	// It came about four seconds after the answer ended.
	tr := res.Transcript()
	answer, again := tr[1], tr[2]
	if gap := again.Start.Sub(answer.End); gap < 4*time.Second || gap > 5*time.Second {
		t.Errorf("re-engaged %v after the answer ended, want about 4 s", gap)
	}
}

// TestReplayDemo pins the README's demo (configs/demo.yaml on configs/scenarios/demo.yaml,
// on the virtual clock): its transcript and its latencies are those in testdata/demo,
// recorded with these engines and models. A change there is a change of behaviour; if it
// is meant, replay the demo (agent replay --config configs/demo.yaml
// configs/scenarios/demo.yaml -o DIR) and copy DIR's transcript.txt and metrics.json.
// Only the tokens generated in vain are not pinned: how many a withdrawn preparation
// generated before its withdrawal reached the LLM is a race between the LLM's and the
// recogniser's workers when the words change at the instant of the user's pause, even
// on a virtual clock. For the same reason the transcript's times may differ by 20 ms:
// whether that preparation's first clause was synthesised, and where a synthesis was
// stopped, changes libespeak-ng's state, and so the length of later speech by up to
// 11 ms (TestRepeatedSynthesis).
func TestReplayDemo(t *testing.T) {
	cfg := pipetest.DemoConfig(t)
	scenario := filepath.Join(testenv.ModuleRoot(t), "configs", "scenarios", "demo.yaml")
	res, _, console := pipetest.RunReplayConsole(t, cfg, scenario)
	pipetest.CheckConsoleShowsHistory(t, console, res.History)
	for _, name := range []string{"transcript.txt", "metrics.json"} {
		want, err := os.ReadFile(filepath.Join("testdata", "demo", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(res.OutDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "metrics.json" {
			got, want = withoutWastedTokens(t, got), withoutWastedTokens(t, want)
		}
		if name == "transcript.txt" && sameTranscript(string(got), string(want), 20*time.Millisecond) {
			continue
		}
		if string(got) != string(want) {
			t.Errorf("the demo's %s changed:\n%s\nwas:\n%s", name, got, want)
		}
	}
}

// sameTranscript reports whether two transcript.txt texts say the same, their times
// within slack of each other.
func sameTranscript(got, want string, slack time.Duration) bool {
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	if len(gl) != len(wl) {
		return false
	}
	for i := range gl {
		g, w := transcriptLine.FindStringSubmatch(gl[i]), transcriptLine.FindStringSubmatch(wl[i])
		if g == nil || w == nil {
			if gl[i] != wl[i] {
				return false
			}
			continue
		}
		if g[3] != w[3] {
			return false
		}
		for j := 1; j <= 2; j++ {
			x, _ := strconv.ParseFloat(g[j], 64)
			y, _ := strconv.ParseFloat(w[j], 64)
			if math.Abs(x-y) > slack.Seconds()+1e-9 {
				return false
			}
		}
	}
	return true
}

// transcriptLine is a line of transcript.txt: start–end (seconds), then the rest.
var transcriptLine = regexp.MustCompile(`^\s*([0-9.]+)–\s*([0-9.]+)\s+(.*)$`)

// withoutWastedTokens returns a metrics.json without its speculation's wasted_tokens.
func withoutWastedTokens(t *testing.T, metricsJSON []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(metricsJSON, &m); err != nil {
		t.Fatal(err)
	}
	if spec, ok := m["speculation"].(map[string]any); ok {
		delete(spec, "wasted_tokens")
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}
