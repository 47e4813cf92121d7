package llamacpp_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/llm/llamacpp"
	"github.com/parley-voice/parley/modules/turnend"
)

// demoTurnTaking is what the calibration needs of configs/demo.yaml: its prompt and its
// end-of-turn thresholds.
type demoTurnTaking struct {
	Dialogue struct {
		PromptFormat string `yaml:"prompt_format"`
		SystemPrompt string `yaml:"system_prompt"`
		UserRole     string `yaml:"user_role"`
		AgentRole    string `yaml:"agent_role"`
	} `yaml:"dialogue"`
	EndOfTurn turnend.Config `yaml:"end_of_turn"`
}

// TestCompletionCalibration checks configs/demo.yaml's end-of-turn thresholds against
// stories260K's estimates with the demo's prompt: 40 short requests
// (testdata/requests.txt), the benchmark's user turns, and every beginning of the
// requests ("set", "set a", …). No complete request may fall below the demo's
// incomplete_below (it would wait the long hold after every such request). Run with -v
// for the figures the config's comment quotes: how far apart the sentences and their
// beginnings are, and how many beginnings the threshold holds open that the word list
// does not.
func TestCompletionCalibration(t *testing.T) {
	root := testenv.ModuleRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "configs", "demo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var demo demoTurnTaking
	if err := yaml.Unmarshal(raw, &demo); err != nil {
		t.Fatal(err)
	}
	if demo.Dialogue.PromptFormat != "plain" {
		t.Fatalf("configs/demo.yaml's prompt format is %q; this test builds the plain one", demo.Dialogue.PromptFormat)
	}
	threshold := demo.EndOfTurn.IncompleteBelow
	lex, err := turnend.NewLexicon("en", nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err = os.ReadFile(filepath.Join("testdata", "requests.txt"))
	if err != nil {
		t.Fatal(err)
	}
	requests := strings.Split(strings.TrimSpace(string(raw)), "\n")

	m := loadStories(t)
	e := newEngine(t, m, llamacpp.Config{})
	store := plainStore(t, m, demo.Dialogue.SystemPrompt, demo.Dialogue.UserRole, demo.Dialogue.AgentRole)

	var sentences, beginnings []float64
	heldByWords, heldByModel := 0, 0
	for _, text := range append(requests, "what time is it", "go forward ten meters", "turn on the living room lamp", "hey my croft") {
		p := completion(t, e, store, text)
		sentences = append(sentences, p)
		if p < threshold {
			t.Errorf("%q: estimate %.5f, below the demo's incomplete_below %g: the demo would hold it open", text, p, threshold)
		}
	}
	for _, text := range requests {
		words := strings.Fields(text)
		for n := 1; n < len(words); n++ {
			p := completion(t, e, store, strings.Join(words[:n], " "))
			beginnings = append(beginnings, p)
			if _, ok := lex.Incomplete(words[:n]); ok {
				heldByWords++
			} else if p < threshold {
				heldByModel++
			}
		}
	}
	slices.Sort(sentences)
	slices.Sort(beginnings)
	below := func(xs []float64) int {
		n, _ := slices.BinarySearch(xs, threshold)
		return n
	}
	t.Logf("%d sentences: lowest %.4f, 10th percentile %.3f, median %.3f", len(sentences),
		sentences[0], sentences[len(sentences)/10], sentences[len(sentences)/2])
	t.Logf("%d beginnings: median %.4f, 90th percentile %.3f; %d below %g, %d held open by the word list, %d more by the model alone",
		len(beginnings), beginnings[len(beginnings)/2], beginnings[len(beginnings)*9/10], below(beginnings), threshold, heldByWords, heldByModel)
}
