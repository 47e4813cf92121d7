package replaytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/pipeline/internal/pipetest"
)

// TestPredictiveScenarioSet replays every scenario of the project's set through the
// predictive and the incremental pipeline: the predictive one must cut in no more often
// than the incremental one, and hear exactly the user turns a listener would (a pause
// after "the", "and" or a hesitation does not end the turn), missing none.
func TestPredictiveScenarioSet(t *testing.T) {
	dir := filepath.Join(testenv.ModuleRoot(t), "configs", "scenarios")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		want, ok := pipetest.ScenarioTurns()[e.Name()]
		if !ok {
			t.Errorf("scenario %s is not in the test's table: how many user turns does it hold?", e.Name())
			continue
		}
		seen++
		t.Run(e.Name(), func(t *testing.T) {
			scenario := filepath.Join(dir, e.Name())
			turns := map[string][]string{}
			for _, p := range []string{pipeline.Predictive, pipeline.Incremental} {
				res, _ := pipetest.RunReplay(t, pipeline.WithPipeline(pipetest.DemoConfig(t), p), scenario)
				turns[p] = pipetest.UserTurns(res.History)
				t.Logf("%s: user turns %q", p, turns[p])
			}
			pred, inc := len(turns[pipeline.Predictive]), len(turns[pipeline.Incremental])
			if pred != want {
				t.Errorf("predictive heard %d user turns %q, want %d", pred, turns[pipeline.Predictive], want)
			}
			// More user turns than the listener counts are cut-ins; fewer are missed turns.
			if cutIns := max(pred-want, 0); cutIns > max(inc-want, 0) {
				t.Errorf("predictive cut in %d times, incremental %d", cutIns, max(inc-want, 0))
			}
		})
	}
	if seen != len(pipetest.ScenarioTurns()) {
		t.Errorf("%d scenarios found, the table has %d", seen, len(pipetest.ScenarioTurns()))
	}
}

// TestWithdrawnReplyLeavesNoTrace: the user pauses after "turn on the"; the agent
// prepares a reply in the pause, and withdraws it when the user goes on. Nothing of it
// may be heard (agent.wav is silent until the real reply), shown (the console), stored
// (history, session) — only the timeline tells it happened.
func TestWithdrawnReplyLeavesNoTrace(t *testing.T) {
	cfg := pipetest.DemoConfig(t)
	scenario := filepath.Join(testenv.ModuleRoot(t), "configs", "scenarios", "pause-mid-sentence.yaml")
	res, rec, console := pipetest.RunReplayConsole(t, cfg, scenario)

	var prepared, withdrawn []int
	for _, c := range rec.Commands {
		switch c.Action {
		case control.Prepare:
			prepared = append(prepared, c.TurnID)
		case control.Withdraw:
			withdrawn = append(withdrawn, c.TurnID)
		}
	}
	if len(withdrawn) == 0 {
		t.Fatalf("no prepared reply was withdrawn (prepared %v): the test no longer tests anything", prepared)
	}
	// The withdrawn replies were synthesised, and nothing of them was played.
	withdrawnTurn := map[int]bool{}
	for _, id := range withdrawn {
		withdrawnTurn[id] = true
	}
	synthesised := 0
	for _, id := range rec.Order {
		if c := rec.Chunks[id]; withdrawnTurn[c.TurnID] && c.Tentative {
			synthesised++
		}
	}
	for _, pr := range rec.Reports {
		if c, ok := pr.Item.(tts.Chunk); ok && c.Tentative && !confirmedTurn(rec, c.TurnID) {
			t.Fatalf("the speaker reports withdrawn audio of turn %d: %s", c.TurnID, pr.Summary())
		}
	}
	t.Logf("prepared %v, withdrawn %v, %d tentative chunks synthesised", prepared, withdrawn, synthesised)

	// History, session and console hold one exchange.
	utts := res.History.Utterances()
	if len(utts) != 2 || utts[0].Speaker != dialogue.User || utts[1].Speaker != dialogue.Agent {
		t.Fatalf("history %+v, want one user turn and one reply", utts)
	}
	pipetest.CheckConsoleShowsHistory(t, console, res.History)
	if n := strings.Count(console, "agent ›"); n != 1 {
		t.Errorf("the console shows %d agent lines:\n%s", n, console)
	}
	saved, err := dialogue.LoadSession(res.SessionDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := saved.History.Utterances(); len(got) != 2 {
		t.Errorf("the session holds %d utterances: %+v", len(got), got)
	}

	// agent.wav is silent until the reply the listener was meant to hear.
	agentAudio, err := audio.DecodeWAVFile(filepath.Join(res.OutDir, "agent.wav"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Metrics) != 1 || res.Metrics[0].FirstAudible.IsZero() {
		t.Fatalf("metrics %+v", res.Metrics)
	}
	first := pipetest.FirstSound(agentAudio)
	if first < 0 {
		t.Fatal("agent.wav is silent")
	}
	userEnd := res.SessionTime(res.Transcript()[0].End)
	if at := audio.SamplesToDuration(int64(first), agentAudio.Rate); at < userEnd {
		t.Fatalf("agent audio at %v, before the user's turn ended (%v): a withdrawn reply was heard", at, userEnd)
	}
}

// confirmedTurn reports whether the manager asked for turn id in earnest (a Respond).
func confirmedTurn(rec *pipetest.Record, id int) bool {
	for _, c := range rec.Commands {
		if c.Action == control.Respond && c.TurnID == id {
			return true
		}
	}
	return false
}

// TestPreparedReplyPlaysAtOnce: a complete question gets its reply prepared in the
// user's pause, and the reply is heard within the end-of-turn hold plus the speaker's
// latency, well before the incremental pipeline's silence threshold would even end the
// turn (virtual clock: computation takes no time, so this is what the design imposes).
func TestPreparedReplyPlaysAtOnce(t *testing.T) {
	cfg := pipetest.DemoConfig(t)
	scenario := filepath.Join(testenv.ModuleRoot(t), "configs", "scenarios", "two-questions.yaml")
	res, rec := pipetest.RunReplay(t, cfg, scenario)
	if len(res.Metrics) == 0 {
		t.Fatal("no exchange")
	}
	m := res.Metrics[0]
	v2v := m.FirstAudible.Sub(m.UserSpeechEnd)
	limit := cfg.EndOfTurn.Holds.Default + cfg.Audio.OutputLatency + 50*time.Millisecond
	if v2v <= 0 || v2v > limit {
		t.Fatalf("voice to voice %v, want at most %v", v2v, limit)
	}
	if !confirmedTurn(rec, res.Metrics[0].AgentTurn) {
		t.Fatal("the reply was not asked for")
	}
	prepared := false
	for _, c := range rec.Commands {
		prepared = prepared || (c.Action == control.Prepare && c.TurnID == m.AgentTurn)
	}
	if !prepared {
		t.Errorf("the reply to %q was not prepared in the pause", pipetest.UserTurns(res.History)[0])
	}
	t.Logf("voice to voice %v (limit %v)", v2v, limit)
}
