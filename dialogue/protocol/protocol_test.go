package protocol

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

var _ Protocol[Scratchpad, Step] = SelfAsk{}

func TestTemplate(t *testing.T) {
	tests := []struct {
		name, text string
		values     map[string]string
		vars       []string
		want       string
	}{
		{"variables", "Hi {name}, {greeting}!", map[string]string{"name": "Ana", "greeting": "welcome"}, []string{"name", "greeting"}, "Hi Ana, welcome!"},
		{"repeated variable", "{a}{b}{a}", map[string]string{"a": "1", "b": "2"}, []string{"a", "b"}, "121"},
		{"escaped braces", "{{literal}} {x} }}", map[string]string{"x": "y"}, []string{"x"}, "{literal} y }"},
		{"extra values ignored", "plain", map[string]string{"unused": "z"}, nil, "plain"},
		{"values are not re-expanded", "{a}", map[string]string{"a": "{b}"}, []string{"a"}, "{b}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := ParseTemplate(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if got := tpl.Variables(); !reflect.DeepEqual(got, tc.vars) {
				t.Errorf("variables %q, want %q", got, tc.vars)
			}
			got, err := tpl.Render(tc.values)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("rendered %q, want %q", got, tc.want)
			}
			if tpl.String() != tc.text && tc.name != "escaped braces" {
				t.Errorf("String() %q", tpl.String())
			}
		})
	}
	for _, bad := range []string{"{", "}", "{ x }", "{1x}", "{a-b}", "{}", "x{y"} {
		if _, err := ParseTemplate(bad); !errors.Is(err, ErrInvalidTemplate) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	tpl := MustParseTemplate("{a}")
	if _, err := tpl.Render(nil); !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("missing value: %v", err)
	}
}

func TestSelfAskEncode(t *testing.T) {
	p := NewSelfAsk()
	p.Examples = []SelfAskExample{
		{Question: "Q1?", FollowUps: []FollowUp{{"F1?", "A1."}}, Answer: "Final1."},
		{Question: "Q2?", Answer: "Final2."},
	}
	const examples = "Question: Q1?\nAre follow up questions needed here: Yes.\nFollow up: F1?\nIntermediate answer: A1.\nSo the final answer is: Final1.\n\n" +
		"Question: Q2?\nAre follow up questions needed here: No.\nSo the final answer is: Final2.\n\n"
	steps := []FollowUp{{"How old is Ana?", "Nine."}, {"How old is Ben?", "Seven."}}
	tests := []struct {
		name     string
		pad      Scratchpad
		want     string
		wantStop []string
	}{
		{"first step", Scratchpad{Question: "Who is older,\nAna or Ben?"},
			examples + "Question: Who is older, Ana or Ben?\nAre follow up questions needed here:",
			[]string{"Intermediate answer:", "\nQuestion:"}},
		{"after follow-ups", Scratchpad{Question: "Who is older?", FollowUps: steps},
			examples + "Question: Who is older?\nAre follow up questions needed here: Yes.\nFollow up: How old is Ana?\nIntermediate answer: Nine.\n" +
				"Follow up: How old is Ben?\nIntermediate answer: Seven.\n",
			[]string{"Intermediate answer:", "\nQuestion:"}},
		{"pending follow-up", Scratchpad{Question: "Who is older?", Pending: "How old is Ana?"},
			examples + "Question: Who is older?\nAre follow up questions needed here: Yes.\nFollow up: How old is Ana?\nIntermediate answer:",
			[]string{"\n"}},
		{"forced answer", Scratchpad{Question: "Who is older?", FollowUps: steps, ForceAnswer: true},
			examples + "Question: Who is older?\nAre follow up questions needed here: Yes.\nFollow up: How old is Ana?\nIntermediate answer: Nine.\n" +
				"Follow up: How old is Ben?\nIntermediate answer: Seven.\nSo the final answer is:",
			[]string{"\n"}},
		{"forced without follow-ups", Scratchpad{Question: "Hi?", ForceAnswer: true},
			examples + "Question: Hi?\nAre follow up questions needed here: No.\nSo the final answer is:",
			[]string{"\n"}},
		{"conversation context", Scratchpad{Question: "And now?", Context: "User: I like cats.\n"},
			examples + "Conversation so far:\nUser: I like cats.\n\nQuestion: And now?\nAre follow up questions needed here:",
			[]string{"Intermediate answer:", "\nQuestion:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, stop, err := p.Encode(tc.pad)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("prompt\n got %q\nwant %q", got, tc.want)
			}
			if !reflect.DeepEqual(stop, tc.wantStop) {
				t.Errorf("stop %q, want %q", stop, tc.wantStop)
			}
		})
	}
	five := make([]FollowUp, DefaultMaxFollowUps)
	for i := range five {
		five[i] = FollowUp{"q?", "a."}
	}
	prompt, _, err := p.Encode(Scratchpad{Question: "x?", FollowUps: five})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(prompt, "So the final answer is:") {
		t.Errorf("the final answer is not forced after %d follow-ups", DefaultMaxFollowUps)
	}
	if _, _, err := p.Encode(Scratchpad{Question: " "}); err == nil {
		t.Error("empty question accepted")
	}
	if _, _, err := (SelfAsk{Template: MustParseTemplate("{question}")}).Encode(Scratchpad{Question: "x"}); !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("template without scratchpad: %v", err)
	}
	// The shipped examples follow the protocol they teach.
	full, _, err := NewSelfAsk().Encode(Scratchpad{Question: "x?"})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(full, "So the final answer is: "); n != len(DefaultSelfAskExamples()) {
		t.Errorf("%d final answers in the examples", n)
	}
}

func TestSelfAskDecode(t *testing.T) {
	p := NewSelfAsk()
	q := Scratchpad{Question: "Who is older?"}
	tests := []struct {
		name    string
		pad     Scratchpad
		output  string
		want    Step
		wantErr bool
	}{
		{"follow-up", q, " Yes.\nFollow up: How old is Ana?\n", Step{FollowUp: "How old is Ana?"}, false},
		{"follow-up with its answer", q, " Yes.\nFollow up: How old is Ana?\nIntermediate answer: Nine.\nFollow up: x", Step{FollowUp: "How old is Ana?", IntermediateAnswer: "Nine."}, false},
		{"direct answer", q, " No.\nSo the final answer is: Ana.\n\nQuestion: something else", Step{Final: true, Answer: "Ana."}, false},
		{"answer after follow-ups", Scratchpad{Question: "x", FollowUps: []FollowUp{{"a", "b"}}}, "So the final answer is: Ben", Step{Final: true, Answer: "Ben"}, false},
		{"first marker wins", q, "So the final answer is: Ana\nFollow up: more?", Step{Final: true, Answer: "Ana"}, false},
		{"case and hyphen variants", q, " yes.\nFOLLOW-UP: Is Ana nine?", Step{FollowUp: "Is Ana nine?"}, false},
		{"answer on the next line", q, "So the final answer is:\n  Ana\n", Step{Final: true, Answer: "Ana"}, false},
		{"forced", Scratchpad{Question: "x", ForceAnswer: true}, " Ana is older.\nQuestion: y", Step{Final: true, Answer: "Ana is older."}, false},
		{"forced with a repeated marker", Scratchpad{Question: "x", ForceAnswer: true}, " So the final answer is: Ana", Step{Final: true, Answer: "Ana"}, false},
		{"pending answer", Scratchpad{Question: "x", Pending: "How old is Ana?"}, " Nine years.\n", Step{FollowUp: "How old is Ana?", IntermediateAnswer: "Nine years."}, false},
		{"invented example is cut", q, " No.\nQuestion: other\nSo the final answer is: wrong", Step{}, true},
		{"nothing", q, " Yes.\n", Step{}, true},
		{"empty follow-up", q, "Follow up:\nIntermediate answer: x", Step{}, true},
		{"empty answer", q, "So the final answer is: \n", Step{}, true},
		{"forced but empty", Scratchpad{Question: "x", ForceAnswer: true}, "  \n", Step{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.Decode(tc.pad, tc.output)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if err != nil {
				if !errors.Is(err, ErrNoDecision) {
					t.Errorf("error %v does not wrap ErrNoDecision", err)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("step %+v, want %+v", got, tc.want)
			}
		})
	}
}

// scriptedModel answers self-ask prompts by rule: it asks the follow-ups in its script
// one by one, answers pending ones from its table, then answers.
type scriptedModel struct {
	followUps []string
	answers   map[string]string
	final     string
	calls     int
	garbage   bool // reply with unparsable text unless forced
}

func (m *scriptedModel) Complete(ctx context.Context, prompt string, maxTokens int, stop []string) (string, error) {
	m.calls++
	switch {
	case strings.HasSuffix(prompt, "So the final answer is:"):
		return " " + m.final + "\n", nil
	case strings.HasSuffix(prompt, "Intermediate answer:"):
		for q, a := range m.answers {
			if strings.HasSuffix(prompt, "Follow up: "+q+"\nIntermediate answer:") {
				return " " + a, nil
			}
		}
		return " I do not know.", nil
	case m.garbage:
		return " Hmm, let me think about it.", nil
	}
	last := prompt[strings.LastIndex(prompt, "Question:"):]
	asked := strings.Count(last, "Follow up:")
	if asked < len(m.followUps) {
		return " Yes.\nFollow up: " + m.followUps[asked] + "\n", nil
	}
	return "So the final answer is: " + m.final + "\n", nil
}

type tableAnswerer map[string]string

func (t tableAnswerer) Answer(ctx context.Context, q string) (string, error) {
	if a, ok := t[q]; ok {
		return a, nil
	}
	return "", errors.New("no idea")
}

func TestSelfAskRun(t *testing.T) {
	ctx := context.Background()
	p := NewSelfAsk()
	t.Run("follow-ups answered by the model", func(t *testing.T) {
		m := &scriptedModel{
			followUps: []string{"How old is Ana?", "How old is Ben?"},
			answers:   map[string]string{"How old is Ana?": "Nine.", "How old is Ben?": "Seven."},
			final:     "Ana.",
		}
		res, err := p.Run(ctx, m, Scratchpad{Question: "Who is older?"}, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := Result{Answer: "Ana.", FollowUps: []FollowUp{{"How old is Ana?", "Nine."}, {"How old is Ben?", "Seven."}}}
		if !reflect.DeepEqual(res, want) {
			t.Errorf("result %+v, want %+v", res, want)
		}
		if m.calls != 5 {
			t.Errorf("%d model calls, want 5", m.calls)
		}
	})
	t.Run("follow-ups answered by a tool", func(t *testing.T) {
		m := &scriptedModel{followUps: []string{"How old is Ana?"}, final: "Ana."}
		res, err := p.Run(ctx, m, Scratchpad{Question: "Who is older?"}, RunOptions{Answerer: tableAnswerer{"How old is Ana?": "Nine."}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Answer != "Ana." || res.FollowUps[0].Answer != "Nine." || m.calls != 2 {
			t.Errorf("result %+v after %d calls", res, m.calls)
		}
	})
	t.Run("at most five follow-ups", func(t *testing.T) {
		m := &scriptedModel{followUps: strings.Split("a? b? c? d? e? f? g?", " "), final: "Done."}
		res, err := p.Run(ctx, m, Scratchpad{Question: "Endless?"}, RunOptions{Answerer: tableAnswerer{"a?": "1", "b?": "2", "c?": "3", "d?": "4", "e?": "5"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.FollowUps) != DefaultMaxFollowUps || !res.Forced || res.Answer != "Done." {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("unreadable output forces the answer", func(t *testing.T) {
		m := &scriptedModel{garbage: true, final: "Forty-two."}
		res, err := p.Run(ctx, m, Scratchpad{Question: "Meaning?"}, RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Answer != "Forty-two." || !res.Forced || m.calls != 2 {
			t.Errorf("result %+v after %d calls", res, m.calls)
		}
	})
	t.Run("tool failure", func(t *testing.T) {
		m := &scriptedModel{followUps: []string{"x?"}, final: "y"}
		if _, err := p.Run(ctx, m, Scratchpad{Question: "q"}, RunOptions{Answerer: tableAnswerer{}}); err == nil {
			t.Error("no error")
		}
	})
}

func TestAnswerFilter(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		want   string
	}{
		{"whole run", []string{" Yes.\nFollow up: How old?\nIntermediate answer: Nine.\nSo the final answer is: Ana is older.\nQuestion: next"}, "Ana is older."},
		{"marker split across tokens", []string{" No.\nSo the fin", "al ans", "wer is", ":", " Ana", " is", " older", ".\n", "Question:"}, "Ana is older."},
		{"answer on its own line", []string{"So the final answer is:\n", "Ana"}, "Ana"},
		{"no answer", []string{"Follow up: x?\n", "Intermediate answer: y\n"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewAnswerFilter()
			var got strings.Builder
			for _, p := range tc.pieces {
				got.WriteString(f.Push(p))
			}
			got.WriteString(f.Flush())
			if got.String() != tc.want {
				t.Errorf("spoken %q, want %q", got.String(), tc.want)
			}
		})
	}
}

func FuzzSelfAskDecode(f *testing.F) {
	f.Add(" Yes.\nFollow up: How old is Ana?\nIntermediate answer: Nine.\n", false, false)
	f.Add(" No.\nSo the final answer is: Ana.", false, false)
	f.Add(" Ana", true, false)
	f.Add(" Nine.", false, true)
	f.Add("follow-UP:FINAL ANSWER IS:", false, false)
	p := NewSelfAsk()
	f.Fuzz(func(t *testing.T, output string, forced, pending bool) {
		pad := Scratchpad{Question: "q", ForceAnswer: forced}
		if pending {
			pad.Pending = "p?"
		}
		step, err := p.Decode(pad, output)
		if err != nil {
			if !errors.Is(err, ErrNoDecision) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		switch {
		case pending:
			if step.IntermediateAnswer == "" || step.Final {
				t.Fatalf("pending step %+v", step)
			}
		case step.Final:
			if step.Answer == "" || strings.Contains(step.Answer, "\n") {
				t.Fatalf("final step %+v", step)
			}
		default:
			if forced || step.FollowUp == "" || strings.Contains(step.FollowUp, "\n") {
				t.Fatalf("follow-up step %+v (forced %v)", step, forced)
			}
		}
		// A decoded follow-up can be fed back: the next prompt encodes.
		if !step.Final && !pending {
			next := Scratchpad{Question: "q", FollowUps: []FollowUp{{step.FollowUp, step.IntermediateAnswer}}}
			if _, _, err := p.Encode(next); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzParseTemplate(f *testing.F) {
	f.Add(DefaultSelfAskTemplate)
	f.Add("{{a}} {b} }}{{")
	f.Fuzz(func(t *testing.T, text string) {
		tpl, err := ParseTemplate(text)
		if err != nil {
			return
		}
		values := map[string]string{}
		for _, v := range tpl.Variables() {
			values[v] = "<" + v + ">"
		}
		if _, err := tpl.Render(values); err != nil {
			t.Fatal(err)
		}
		back, err := ParseTemplate(tpl.String())
		if err != nil {
			t.Fatalf("String() %q does not parse: %v", tpl.String(), err)
		}
		a, _ := tpl.Render(values)
		b, _ := back.Render(values)
		if a != b {
			t.Fatalf("round trip renders %q, then %q", a, b)
		}
	})
}
