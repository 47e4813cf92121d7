package replaytest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llmtest"
	"github.com/parley-voice/parley/modules/turnend"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/pipeline/internal/pipetest"
)

// TestLoadEnginesLearnsServerContext: with the http engine the prompt is fitted to the
// context the server reports (llama-server -c 512), or to llm.context when that is
// smaller, or when the server does not say (an OpenAI-style API). An llm.context longer
// than the server's is refused, with the server's as the limit.
func TestLoadEnginesLearnsServerContext(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	openAI := httptest.NewServer(http.NotFoundHandler())
	defer openAI.Close()
	for _, tt := range []struct {
		url        string
		configured int
		want       int
		wantErr    string
	}{
		{srv.URL, 0, 512, ""},
		{srv.URL + "/v1", 4096, 0, "llm.context: 4096 tokens is more than the server's context (want 1–512, or 0 for the server's)"},
		{srv.URL, 256, 256, ""},
		{openAI.URL + "/v1", 1000, 1000, ""},
		{openAI.URL + "/v1", 0, 0, ""},
	} {
		cfg := pipetest.DemoConfig(t)
		cfg.LLM.Engine, cfg.LLM.URL, cfg.LLM.Context = "http", tt.url, tt.configured
		eng, err := pipeline.LoadEngines(cfg, nil)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, pipeline.ErrInvalidConfig) {
				t.Errorf("%s with llm.context %d: %v, want %q", tt.url, tt.configured, err, tt.wantErr)
			}
			if eng != nil {
				eng.Close()
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if eng.Context != tt.want {
			t.Errorf("%s with llm.context %d: fitted to %d tokens, want %d", tt.url, tt.configured, eng.Context, tt.want)
		}
		eng.Close()
	}
}

// TestPredictiveWithLlamaServer: with the http engine and a real llama-server, the
// predictive pipeline feeds the user's words to the server while they speak, and the
// end of the turn is decided on the server's estimate that the turn is complete, as
// with the in-process engine: the same user turns, and the same decisions. The server
// lists only its likeliest tokens, so its estimate is a range that holds the in-process
// probability; where that range spans a threshold it decides nothing ("undecided"),
// and only there may the two differ. One turn may end before the server's estimate
// comes (it answers in real time, and its first request is slow under load).
func TestPredictiveWithLlamaServer(t *testing.T) {
	srv := llmtest.StartLlamaServer(t, 0)
	scenario := filepath.Join(testenv.ModuleRoot(t), "configs", "scenarios", "demo.yaml")
	decisions := map[string][]string{}
	turns := map[string][]string{}
	estimates := map[string]map[string]llm.TurnCompletion{}
	var eot turnend.Config
	for _, engine := range []string{"llama", "http"} {
		cfg := pipetest.DemoConfig(t)
		eot = cfg.EndOfTurn
		if engine == "http" {
			cfg.LLM.Engine, cfg.LLM.URL = "http", srv.URL
		}
		res, rec := pipetest.RunReplay(t, cfg, scenario)
		turns[engine], estimates[engine] = pipetest.UserTurns(res.History), rec.Completions
		if got, want := len(turns[engine]), pipetest.ScenarioTurns()["demo.yaml"]; got != want {
			t.Fatalf("%s: user turns %q, want %d", engine, turns[engine], want)
		}
		for _, e := range rec.TurnEnds {
			if e.Reason == "" {
				continue // the VAD's own, which the policy's supersedes
			}
			// "complete (p=0.24–0.25)" → "complete": the server's estimate is a range.
			kind, _, _ := strings.Cut(e.Reason, " (p=")
			decisions[engine] = append(decisions[engine], kind)
		}
		t.Logf("%s: the turns ended %q", engine, rec.TurnEnds)
	}
	if !slices.Equal(turns["http"], turns["llama"]) || len(decisions["http"]) != len(turns["http"]) || len(decisions["llama"]) != len(turns["llama"]) {
		t.Fatalf("user turns %q with llama-server, %q in process; ends of turns %q and %q", turns["http"], turns["llama"], decisions["http"], decisions["llama"])
	}
	spans := func(lo, hi, threshold float64) bool { return lo < threshold && hi >= threshold }
	compared := 0
	for i, text := range turns["http"] {
		local, ok1 := estimates["llama"][text]
		remote, ok2 := estimates["http"][text]
		if !ok2 && decisions["http"][i] == "no completion estimate" {
			// The server answers in real time: under load (its first request) its
			// estimate can come after the turn's end, which then has the default hold.
			t.Logf("%q: the turn ended before llama-server's estimate came", text)
			continue
		}
		if !ok1 && ok2 {
			// The session's first turn may end on its partial words' estimate, in the
			// frame that brings pocketsphinx's final pass the trailing audio it waits
			// for: the final words then have none.
			t.Logf("%q: the turn ended before the final pass's words had an estimate in process", text)
			continue
		}
		if !ok1 || !ok2 {
			t.Errorf("%q: no estimate in process (%v) or from the server (%v)", text, ok1, ok2)
			continue
		}
		// The two evaluate the same prompt with the same weights, up to float rounding.
		const slack = 0.005
		if local.P < remote.P-slack || local.P > remote.PMax+slack {
			t.Errorf("%q: in process p=%.4f, outside the server's %.4f–%.4f", text, local.P, remote.P, remote.PMax)
		}
		compared++
		got, want := decisions["http"][i], decisions["llama"][i]
		t.Logf("%q: in process p=%.4f, %s; llama-server p=%.4f–%.4f, %s", text, local.P, want, remote.P, remote.PMax, got)
		undecidable := spans(remote.P, remote.PMax, eot.CompleteAbove) || spans(remote.P, remote.PMax, eot.IncompleteBelow)
		if got != want && !(got == "undecided" && undecidable) {
			t.Errorf("%q: the turn ended %s with llama-server (p=%.4f–%.4f), %s in process (p=%.4f)", text, got, remote.P, remote.PMax, want, local.P)
		}
	}
	if compared < len(turns["http"])-1 {
		t.Errorf("only %d of %d turns had llama-server's estimate in time", compared, len(turns["http"]))
	}
	if !slices.Contains(decisions["http"], "complete") {
		t.Errorf("no turn ended on the server's estimate that it was complete: %q", decisions["http"])
	}
}
