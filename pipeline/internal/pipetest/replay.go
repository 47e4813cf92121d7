package pipetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/userdirs"
)

// DemoConfig loads configs/demo.yaml: Silero VAD, pocketsphinx, stories260K, espeak-ng.
func DemoConfig(t testing.TB) pipeline.Config {
	t.Helper()
	shared := testenv.SharedDir(t)
	t.Setenv("PARLEY_SHARED", shared)
	testenv.File(t, filepath.Join(shared, "models", "stories260K.gguf"), "the shared test assets")
	cfg, err := pipeline.Load(filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml"), pipeline.Default(userdirs.Paths{Models: t.TempDir(), Sessions: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// WriteScenario writes a scenario file placing recordings at times (seconds).
func WriteScenario(t *testing.T, tail float64, recs ...any) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "tail: %g\nrecordings:\n", tail)
	for i := 0; i < len(recs); i += 2 {
		fmt.Fprintf(&b, "  - file: %s\n    at: %g\n", recs[i], recs[i+1])
	}
	path := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Record collects the IUs a test checks against (the TTS's chunks, the speaker's
// reports, the manager's commands, the ends of the user's turns) in the order they were sent.
type Record struct {
	mu       sync.Mutex
	Chunks   map[iu.ID]tts.Chunk
	Order    []iu.ID
	Revoked  map[iu.ID]bool // chunks withdrawn unplayed (a withdrawn preparation's)
	Reports  []speaker.Progress
	Commands []control.Command
	Words    []string
	TurnEnds []vad.EndOfTurn
	// completions holds the LLM's latest estimate that the user's words are complete,
	// by the words.
	Completions map[string]llm.TurnCompletion
}

// NewRecord returns an empty record.
func NewRecord() *Record {
	return &Record{Chunks: map[iu.ID]tts.Chunk{}, Revoked: map[iu.ID]bool{}, Completions: map[string]llm.TurnCompletion{}}
}

// Observe implements iu.Observer.
func (r *Record) Observe(_ time.Time, m iu.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, up := range m.Updates {
		if w, ok := up.IU.Payload.(asrWord); ok {
			r.Words = append(r.Words, fmt.Sprintf("%s %s", up.Type, w.Summary()))
		}
		if _, ok := up.IU.Payload.(tts.Chunk); ok && up.Type == iu.Revoke {
			r.Revoked[up.IU.ID] = true
		}
		if up.Type != iu.Add {
			continue
		}
		switch pl := up.IU.Payload.(type) {
		case tts.Chunk:
			r.Chunks[up.IU.ID] = pl
			r.Order = append(r.Order, up.IU.ID)
		case speaker.Progress:
			r.Reports = append(r.Reports, pl)
		case control.Command:
			r.Commands = append(r.Commands, pl)
		case vad.EndOfTurn:
			r.TurnEnds = append(r.TurnEnds, pl)
		case llm.TurnCompletion:
			r.Completions[pl.Text] = pl
		}
	}
}

// RunReplay replays scenario with cfg's engines on the virtual clock, recording what the
// tests check.
func RunReplay(t *testing.T, cfg pipeline.Config, scenario string) (*pipeline.ReplayResult, *Record) {
	t.Helper()
	res, rec, _ := RunReplayConsole(t, cfg, scenario)
	return res, rec
}

// RunReplayConsole is RunReplay that also returns what the console printed.
func RunReplayConsole(t *testing.T, cfg pipeline.Config, scenario string) (*pipeline.ReplayResult, *Record, string) {
	t.Helper()
	eng, err := pipeline.LoadEngines(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	rec := NewRecord()
	ctx, cancel := ReplayContext(t)
	defer cancel()
	var console strings.Builder
	res, err := pipeline.Replay(ctx, cfg, eng, pipeline.ReplayOptions{Input: scenario, OutDir: t.TempDir(), Record: true, Console: &console, Observers: []iu.Observer{rec}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("conversation:\n%s", console.String())
	return res, rec, console.String()
}

// consoleAgentTurns returns the agent's lines a console printed, as "text" or
// "text (interrupted)", leaving out a turn the console marks as not stored.
func consoleAgentTurns(console string) []string {
	// A line that does not start with a time continues the one before (text with a
	// line break in it).
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(console, "\n"), "\n") {
		if n := len(lines); n > 0 && !strings.HasPrefix(l, "[") {
			lines[n-1] += "\n" + l
			continue
		}
		lines = append(lines, l)
	}
	var out []string
	for _, line := range lines {
		_, text, ok := strings.Cut(line, "] agent › ")
		if !ok || strings.HasSuffix(text, " —(not stored)") {
			continue // a turn the session ended in the middle of says it was not stored
		}
		if cut, interrupted := strings.CutSuffix(text, " —(interrupted)"); interrupted {
			text = cut + " (interrupted)"
		}
		out = append(out, text)
	}
	return out
}

// historyAgentTurns returns the agent's stored turns in the same form.
func historyAgentTurns(h *dialogue.History) []string {
	var out []string
	for _, u := range AgentUtterances(h) {
		text := u.Text
		if u.Interrupted {
			text += " (interrupted)"
		}
		out = append(out, text)
	}
	return out
}

// CheckConsoleShowsHistory checks that the console printed each agent turn exactly as
// the history stored it: an interrupted turn cut where the history cut it.
func CheckConsoleShowsHistory(t *testing.T, console string, h *dialogue.History) {
	t.Helper()
	if got, want := consoleAgentTurns(console), historyAgentTurns(h); !slices.Equal(got, want) {
		t.Errorf("the console showed the agent's turns as\n%q\nthe history stored\n%q", got, want)
	}
}

// AgentUtterances returns the agent's stored turns.
func AgentUtterances(h *dialogue.History) []dialogue.Utterance {
	var out []dialogue.Utterance
	for _, u := range h.Utterances() {
		if u.Speaker == dialogue.Agent {
			out = append(out, u)
		}
	}
	return out
}

// HeardText works out, from the speaker's own reports and the TTS chunks, which words of
// an interrupted turn the listener heard completely: the reference the stored turn must
// equal (with min_word_fraction 1, only whole words count).
func HeardText(t *testing.T, rec *Record, turn int) string {
	t.Helper()
	var final *speaker.Progress
	for i := range rec.Reports {
		pr := rec.Reports[i]
		if c, ok := pr.Item.(tts.Chunk); ok && c.TurnID == turn && pr.State == speaker.Stopped && !pr.Tail {
			final = &pr
		}
	}
	if final == nil {
		t.Fatalf("the speaker never reported stopping turn %d", turn)
	}
	heard := final.Item.(tts.Chunk)
	// Is the word in progress complete? Only if the chunk was heard to its end and no
	// later chunk of the same word exists.
	complete := final.Offset >= heard.Audio.Len()
	var clauses []string
	for i, id := range rec.Order {
		c := rec.Chunks[id]
		if c.TurnID != turn || rec.Revoked[id] {
			continue
		}
		if c.ClauseID == heard.ClauseID && c.Seq == heard.Seq+1 && c.WordIndex == heard.WordIndex && heard.WordIndex >= 0 {
			complete = false
		}
		if c.FirstOfClause && c.ClauseID < heard.ClauseID {
			clauses = append(clauses, c.ClauseText)
		}
		_ = i
	}
	end := heard.CharStart
	if heard.WordIndex < 0 || complete {
		end = heard.CharEnd
	}
	spaceOrPunct := func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }
	last := strings.TrimRightFunc(heard.ClauseText[:end], spaceOrPunct)
	if strings.TrimFunc(heard.ClauseText[end:], spaceOrPunct) == "" {
		// The clause's last word was heard whole: so was the clause, punctuation and all.
		last = strings.TrimRightFunc(heard.ClauseText, unicode.IsSpace)
	}
	if last != "" {
		clauses = append(clauses, last)
	}
	return strings.Join(clauses, " ")
}

// Backchannel synthesises "yeah" with the espeak-ng command (a voice pocketsphinx
// recognises as "yeah").
func Backchannel(t *testing.T) string {
	t.Helper()
	bin := testenv.Command(t, "espeak-ng", testenv.EnvFix)
	path := filepath.Join(t.TempDir(), "yeah.wav")
	if out, err := exec.Command(bin, "-v", "en-gb", "-s", "175", "-w", path, "yeah").CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v\n%s", err, out)
	}
	return path
}

type asrWord = asr.Word

// QuietNativeLogs silences libwhisper, which logs every VAD window, and libllama, which
// logs every tensor at info level (a test package's TestMain calls it).
func QuietNativeLogs() {
	whisper.SetLogger(whisper.LogNone, nil)
	llama.SetLogger(llama.LogNone, nil)
}

// ReplayContext bounds a replay by the test binary's own deadline (go test -timeout),
// shortly before it, so that a replay that hangs fails its test with the test's logs. A
// replay on the virtual clock takes as long as the machine's load makes it, which is no
// failure: a fixed bound would make the test depend on that load.
func ReplayContext(t testing.TB) (context.Context, context.CancelFunc) {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := d.Deadline(); ok {
			return context.WithDeadline(context.Background(), end.Add(-deadlineMargin(time.Until(end))))
		}
	}
	return context.WithCancel(context.Background())
}

// deadlineMargin is how long before the test binary's deadline a replay is stopped: time
// enough to report, a tenth of what is left and at most 30 s.
func deadlineMargin(left time.Duration) time.Duration {
	return min(left/10, 30*time.Second)
}
