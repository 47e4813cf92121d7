package dialogue

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

// The seed agent's example, from issue 7, byte for byte.
const issueExamplePrompt = "[INST] <<SYS>>\nS\n<</SYS>>\n\nChild : Hello !\n\nTeacher : Hi! How are you today ?\n\n" +
	"Child : I am fine, and I can't wait to learn mathematics!\n\n[/INST]\nTeacher :"

func issueExampleHistory(t *testing.T, f Format) *History {
	t.Helper()
	h := NewHistory(f, "S")
	for _, u := range []Utterance{
		{Speaker: User, Text: "Hello !", TurnID: 1},
		{Speaker: Agent, Text: "Hi! How are you today ?", TurnID: 1},
		{Speaker: User, Text: "I am fine, and I can't wait to learn mathematics!", TurnID: 2},
	} {
		if _, err := h.Append(u); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func TestIssueExamplePrompt(t *testing.T) {
	// The config exactly as the issue states it: no optional field, so the spacing comes
	// from the documented defaults.
	const issueConfig = `{
		"user": {"role": "Child", "role_sep": ":", "pre": "", "suf": "\n\n"},
		"agent": {"role": "Teacher", "role_sep": ":", "pre": "", "suf": "\n\n"},
		"system_prompt": {"pre": "<<SYS>>\n", "suf": "<</SYS>>\n\n"},
		"prompt": {"pre": "[INST] ", "suf": "[/INST]"}
	}`
	fromIssue, err := ParseFormat([]byte(issueConfig))
	if err != nil {
		t.Fatal(err)
	}
	byName, err := LoadFormat("llama2")
	if err != nil {
		t.Fatal(err)
	}
	byPath, err := LoadFormat(filepath.Join(testenv.ModuleRoot(t), "configs", "prompts", "llama2.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		format Format
	}{{"issue config", fromIssue}, {"shipped by name", byName}, {"shipped by path", byPath}} {
		t.Run(tc.name, func(t *testing.T) {
			got := issueExampleHistory(t, tc.format).Prompt(ForTurn(2))
			if got != issueExamplePrompt {
				t.Fatalf("prompt mismatch\n got: %q\nwant: %q", got, issueExamplePrompt)
			}
		})
	}
}

// The rules derived from the example, one by one.
func TestSpacingRules(t *testing.T) {
	f, err := LoadFormat("llama2")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, got, want string
	}{
		{"system text is followed by a newline before suf", f.SystemBlock("S"), "<<SYS>>\nS\n<</SYS>>\n\n"},
		{"role and role_sep joined by a space", f.User.Header(), "Child :"},
		{"cue is newline, agent role, space, role_sep", f.Cue(), "\nTeacher :"},
		{"empty system prompt leaves no block", f.SystemBlock("  "), ""},
		{"system text is trimmed", f.SystemBlock(" S \n"), "<<SYS>>\nS\n<</SYS>>\n\n"},
		{"turn: header, space, text", NewHistory(f, "").Prompt(PromptOptions{}), "[INST] [/INST]\nTeacher :"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %q, want %q", tc.got, tc.want)
			}
		})
	}

	defaults := []struct {
		name                    string
		role                    RoleFormat
		wantHeader, wantOpening string
	}{
		{"role and sep", RoleFormat{Role: "A", RoleSep: ":"}, "A :", "A : "},
		{"role only", RoleFormat{Role: "A"}, "A", "A "},
		{"sep only", RoleFormat{RoleSep: ">"}, ">", "> "},
		{"neither", RoleFormat{Pre: "[INST] "}, "", "[INST] "},
		{"explicit no spaces", RoleFormat{Role: "user", RoleSep: "\n", RoleSpace: strPtr(""), TextSpace: strPtr("")}, "user\n", "user\n"},
		{"explicit text space without header", RoleFormat{TextSpace: strPtr(" ")}, "", " "},
	}
	for _, tc := range defaults {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.role.Header(); got != tc.wantHeader {
				t.Errorf("header %q, want %q", got, tc.wantHeader)
			}
			if got := tc.role.opening(); got != tc.wantOpening {
				t.Errorf("opening %q, want %q", got, tc.wantOpening)
			}
		})
	}
}

// Each shipped format against its model family's documented template, for the
// conversation system "test", user "hello", assistant "response", user "again" (the
// conversation llama.cpp's template tests use). Sources:
//   - chatml, llama2-chat, gemma: llama.cpp's "Templates supported by
//     llama_chat_apply_template" (outputs of the models' Hugging Face templates);
//   - llama3: Meta's Llama 3 model card prompt format (header ids, "\n\n", <|eot_id|>);
//   - mistral: docs.mistral.ai tokenization cookbook, tokenizer V3, with mistral-common's
//     placement of the system prompt before the last user message;
//   - gemma's system prompt: Gemma 2/3 templates put it, then "\n\n", at the start of the
//     first user turn.
//
// BOS tokens (<s>, <|begin_of_text|>, <bos>) are the tokenizer's, not the format's.
func TestShippedFormatsMatchTheirTemplates(t *testing.T) {
	tests := []struct {
		name string
		want string
		stop []string
	}{
		{"chatml",
			"<|im_start|>system\ntest<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\nresponse<|im_end|>\n" +
				"<|im_start|>user\nagain<|im_end|>\n<|im_start|>assistant\n",
			[]string{"<|im_start|>user", "<|im_start|>assistant", "<|im_end|>"}},
		{"llama3",
			"<|start_header_id|>system<|end_header_id|>\n\ntest<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\nresponse<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nagain<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n",
			[]string{"<|start_header_id|>user<|end_header_id|>", "<|start_header_id|>assistant<|end_header_id|>", "<|eot_id|>"}},
		{"llama2-chat",
			"[INST] <<SYS>>\ntest\n<</SYS>>\n\nhello [/INST] response </s><s>[INST] again [/INST]",
			[]string{"[INST]", "</s><s>"}},
		{"mistral",
			"[INST] hello[/INST] response</s>[INST] test\n\nagain[/INST]",
			[]string{"[INST]", "</s>"}},
		{"gemma",
			"<start_of_turn>user\ntest\n\nhello<end_of_turn>\n<start_of_turn>model\nresponse<end_of_turn>\n" +
				"<start_of_turn>user\nagain<end_of_turn>\n<start_of_turn>model\n",
			[]string{"<start_of_turn>user", "<start_of_turn>model", "<end_of_turn>"}},
		{"plain",
			"test\n\nUser: hello\nAssistant: response\nUser: again\nAssistant:",
			[]string{"User:", "Assistant:"}},
		{"llama2",
			"[INST] <<SYS>>\ntest\n<</SYS>>\n\nChild : hello\n\nTeacher : response\n\nChild : again\n\n[/INST]\nTeacher :",
			[]string{"Child :", "Teacher :", "[INST]"}},
	}
	shipped := BuiltinFormats()
	if len(shipped) != len(tests) {
		t.Errorf("shipped formats %v; the test covers %d", shipped, len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := LoadFormat(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if f.Name != tc.name {
				t.Errorf("name %q", f.Name)
			}
			h := NewHistory(f, "test")
			for _, u := range []Utterance{
				{Speaker: User, Text: "hello", TurnID: 1},
				{Speaker: Agent, Text: " response", TurnID: 1}, // models emit the leading space
				{Speaker: User, Text: "again", TurnID: 2},
			} {
				if _, err := h.Append(u); err != nil {
					t.Fatal(err)
				}
			}
			if got := h.Prompt(ForTurn(2)); got != tc.want {
				t.Errorf("prompt\n got: %q\nwant: %q", got, tc.want)
			}
			if got := h.StopPatterns(); !reflect.DeepEqual(got, tc.stop) {
				t.Errorf("stop patterns %q, want %q", got, tc.stop)
			}
		})
	}
}

func TestSystemPlacementWithoutUserTurn(t *testing.T) {
	tests := []struct{ format, want string }{
		// The system block becomes a user turn of its own (trailing blank lines dropped).
		{"gemma", "<start_of_turn>user\nS<end_of_turn>\n<start_of_turn>model\nHi!<end_of_turn>\n<start_of_turn>model\n"},
		{"mistral", "[INST] S[/INST] Hi!</s>"},
		{"chatml", "<|im_start|>system\nS<|im_end|>\n<|im_start|>assistant\nHi!<|im_end|>\n<|im_start|>assistant\n"},
	}
	for _, tc := range tests {
		t.Run(tc.format, func(t *testing.T) {
			f, err := LoadFormat(tc.format)
			if err != nil {
				t.Fatal(err)
			}
			h := NewHistory(f, "S")
			if _, err := h.Append(Utterance{Speaker: Agent, Text: "Hi!", TurnID: 0}); err != nil {
				t.Fatal(err)
			}
			if got := h.Prompt(PromptOptions{}); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestParseFormatErrors(t *testing.T) {
	tests := []struct{ name, config string }{
		{"unknown field", `{"user": {"role": "A", "roel_sep": ":"}, "agent": {"role": "B"}}`},
		{"bad placement", `{"user": {"role": "A"}, "agent": {"role": "B"}, "system_prompt": {"placement": "middle"}}`},
		{"trailing data", `{"user": {"role": "A"}, "agent": {"role": "B"}} {}`},
		{"indistinguishable roles", `{"user": {"role": "A"}, "agent": {"role": "A"}}`},
		{"blank stop", `{"user": {"role": "A"}, "agent": {"role": "B"}, "stop": [" "]}`},
		{"not json", `user: A`},
		{"wrong type", `{"user": {"role": 3}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseFormat([]byte(tc.config)); !errors.Is(err, ErrInvalidFormat) {
				t.Fatalf("error %v, want ErrInvalidFormat", err)
			}
		})
	}
}

func TestLoadFormat(t *testing.T) {
	if _, err := LoadFormat("no-such-format"); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := BuiltinFormat("../format"); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("path as name: %v", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.json")
	if err := os.WriteFile(file, []byte(`{"user": {"role": "Q", "role_sep": ":"}, "agent": {"role": "A", "role_sep": ":"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LoadFormat(file)
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "mine" {
		t.Errorf("name from file %q", f.Name)
	}
	if _, err := LoadFormat(filepath.Join(dir, "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestWithRoles(t *testing.T) {
	f, err := LoadFormat("llama2")
	if err != nil {
		t.Fatal(err)
	}
	g := f.WithRoles("Student", "Tutor")
	if got := g.Cue(); got != "\nTutor :" {
		t.Errorf("cue %q", got)
	}
	if f.User.Role != "Child" {
		t.Error("WithRoles changed the original")
	}
}

func FuzzParseFormat(f *testing.F) {
	for _, name := range BuiltinFormats() {
		data, err := os.ReadFile(filepath.Join("..", "configs", "prompts", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"user":{"role":"A","role_space":"","text_space":null},"agent":{"role":"B"},"system_prompt":{"placement":"last_user"}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fm, err := ParseFormat(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidFormat) {
				t.Fatalf("error does not wrap ErrInvalidFormat: %v", err)
			}
			return
		}
		// A valid format survives a round trip and lays out any conversation.
		out, err := json.Marshal(fm)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseFormat(out)
		if err != nil {
			t.Fatalf("round trip: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(fm, back) {
			t.Fatalf("round trip changed the format:\n%+v\n%+v", fm, back)
		}
		h := NewHistory(fm, "sys", WithInterruptedMark("..."))
		h.Append(Utterance{Speaker: User, Text: "q", TurnID: 1})
		h.Append(Utterance{Speaker: Agent, Text: "a", TurnID: 1, Interrupted: true})
		p := h.Prompt(PromptOptions{})
		if !strings.HasSuffix(p, fm.Cue()) || !strings.Contains(p, "a...") {
			t.Fatalf("prompt %q", p)
		}
		for _, s := range fm.StopPatterns() {
			if strings.TrimSpace(s) != s || s == "" {
				t.Fatalf("stop pattern %q", s)
			}
		}
	})
}

func TestLoadFormatFileRefusesDevices(t *testing.T) {
	for _, path := range []string{"/dev/stdin", "/dev/zero", t.TempDir()} {
		if _, err := LoadFormatFile(path); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("LoadFormatFile(%s) = %v, want a 'not a regular file' error", path, err)
		}
	}
}
