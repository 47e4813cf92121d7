package dialogue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/parley-voice/parley/configs/prompts"
	"github.com/parley-voice/parley/internal/regularfile"
)

// Format describes how a conversation is laid out as one prompt string for a model: the
// chat template. It is read from JSON (see ParseFormat) and is a plain value.
//
// # Layout rules
//
// A prompt is, in order:
//
//	Prompt.Pre
//	system block            (placement "start"; only when the system text is not empty)
//	one turn per utterance  (oldest first)
//	Prompt.Suf
//	generation cue
//
// with
//
//	system block = SystemPrompt.Pre + system text + SystemPrompt.TextEnd + SystemPrompt.Suf
//	turn         = role.Pre + header(role) + TextSpace + utterance text + role.Suf
//	header(role) = role.Role + RoleSpace + role.RoleSep
//	cue          = Prompt.CuePre + Agent.Pre + header(Agent)
//
// and these defaults for the optional spacing fields (they were derived from the seed
// agent's Llama-2 example, "Child : Hello !"):
//
//   - RoleSpace (between the role name and its separator) is " " when both the role name
//     and the separator are non-empty, else "";
//   - TextSpace (between the header and the text) is " " when the header is non-empty,
//     else "";
//   - SystemPrompt.TextEnd (after the system text, before SystemPrompt.Suf) is "\n";
//   - Prompt.CuePre (between Prompt.Suf and the agent header that cues the reply) is "\n".
//
// An explicitly given value, including "", always wins over the default: that is how
// templates without spaces are written (ChatML's "<|im_start|>user\n" is Pre
// "<|im_start|>", Role "user", RoleSpace "", RoleSep "\n", TextSpace "").
//
// The generation cue never ends with TextSpace: the model writes the text's leading
// space itself, as it saw in training.
//
// Utterance and system texts are trimmed of surrounding white space before they are laid
// out. Formats never contain the tokenizer's BOS token (the engine adds it when it
// tokenizes with special tokens), and control strings such as "<|im_start|>" only become
// control tokens when the prompt is tokenized with special-token parsing on.
//
// # System placement
//
// SystemPrompt.Placement says where the system block goes. "start" (the default) puts it
// after Prompt.Pre. "first_user" and "last_user" put it inside the first or the last user
// turn of the prompt, between that turn's header (and TextSpace) and its text: that is
// how Llama-2-chat, Gemma and Mistral carry a system prompt. When the prompt has no user
// turn, the system block becomes a user turn of its own at the start.
type Format struct {
	// Name is the format's short name (the config's file name for shipped formats).
	Name string `json:"name,omitempty"`
	// Description says which models use the format.
	Description  string       `json:"description,omitempty"`
	User         RoleFormat   `json:"user"`
	Agent        RoleFormat   `json:"agent"`
	SystemPrompt SystemFormat `json:"system_prompt"`
	Prompt       PromptFormat `json:"prompt"`
	// Stop lists stop patterns beyond the ones derived from the roles (see StopPatterns).
	Stop []string `json:"stop,omitempty"`
}

// RoleFormat lays out the turns of one speaker.
type RoleFormat struct {
	Role    string `json:"role"`
	RoleSep string `json:"role_sep"`
	Pre     string `json:"pre"`
	Suf     string `json:"suf"`
	// RoleSpace goes between Role and RoleSep; nil means the default (see Format).
	RoleSpace *string `json:"role_space,omitempty"`
	// TextSpace goes between the header and the text; nil means the default (see Format).
	TextSpace *string `json:"text_space,omitempty"`
}

// SystemFormat lays out the system prompt.
type SystemFormat struct {
	Pre string `json:"pre"`
	Suf string `json:"suf"`
	// TextEnd goes between the system text and Suf; nil means "\n".
	TextEnd *string `json:"text_end,omitempty"`
	// Placement is "start" (default), "first_user" or "last_user"; see Format.
	Placement string `json:"placement,omitempty"`
}

// PromptFormat wraps the whole prompt.
type PromptFormat struct {
	Pre string `json:"pre"`
	Suf string `json:"suf"`
	// CuePre goes between Suf and the agent header that cues the reply; nil means "\n".
	CuePre *string `json:"cue_pre,omitempty"`
}

// System block placements.
const (
	PlaceStart     = "start"
	PlaceFirstUser = "first_user"
	PlaceLastUser  = "last_user"
)

// Limits on format configs, which come from files users edit.
const (
	maxFormatBytes = 1 << 20
	maxFieldBytes  = 4 << 10
	maxStops       = 64
)

// ErrInvalidFormat is wrapped by every error about a malformed prompt-format config.
var ErrInvalidFormat = errors.New("invalid prompt format")

// ErrUnknownFormat is returned by LoadFormat for a name that is not a shipped format.
var ErrUnknownFormat = errors.New("unknown prompt format")

func orDefault(p *string, def string) string {
	if p != nil {
		return *p
	}
	return def
}

func strPtr(s string) *string { return &s }

// roleSpace returns the text between r's role name and separator.
func (r RoleFormat) roleSpace() string {
	def := ""
	if r.Role != "" && r.RoleSep != "" {
		def = " "
	}
	return orDefault(r.RoleSpace, def)
}

// Header returns the role's header: its name, the role space and its separator
// ("Child :", "user\n").
func (r RoleFormat) Header() string { return r.Role + r.roleSpace() + r.RoleSep }

func (r RoleFormat) textSpace() string {
	def := ""
	if r.Header() != "" {
		def = " "
	}
	return orDefault(r.TextSpace, def)
}

// opening is everything a turn puts before its text.
func (r RoleFormat) opening() string { return r.Pre + r.Header() + r.textSpace() }

func (s SystemFormat) textEnd() string { return orDefault(s.TextEnd, "\n") }

func (s SystemFormat) placement() string {
	if s.Placement == "" {
		return PlaceStart
	}
	return s.Placement
}

func (p PromptFormat) cuePre() string { return orDefault(p.CuePre, "\n") }

// Cue returns the text that ends every prompt and asks the model for the agent's turn.
func (f Format) Cue() string { return f.Prompt.cuePre() + f.Agent.Pre + f.Agent.Header() }

// SystemBlock returns the laid-out system block for the system text (trimmed), or "" when
// the text is empty.
func (f Format) SystemBlock(text string) string {
	text = strings.TrimSpace(text)
	if text == "" {
		return ""
	}
	return f.SystemPrompt.Pre + text + f.SystemPrompt.textEnd() + f.SystemPrompt.Suf
}

func (f Format) role(s Speaker) RoleFormat {
	if s == Agent {
		return f.Agent
	}
	return f.User
}

// StopPatterns returns the strings at which the model's reply must end: for both roles
// the start of a new turn (Pre + header, trimmed of white space), the agent's turn end
// (Agent.Suf trimmed, when not blank) and the format's extra Stop list, without
// duplicates or empty strings.
func (f Format) StopPatterns() []string {
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		s = strings.TrimSpace(s)
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	add(f.User.Pre + f.User.Header())
	add(f.Agent.Pre + f.Agent.Header())
	add(f.Agent.Suf)
	for _, s := range f.Stop {
		add(s)
	}
	return out
}

// WithRoles returns a copy of f whose user and agent role names are user and agent.
func (f Format) WithRoles(user, agent string) Format {
	f.User.Role = user
	f.Agent.Role = agent
	f.Stop = append([]string(nil), f.Stop...)
	return f
}

// Validate checks the things a config file can get wrong.
func (f Format) Validate() error {
	fields := []struct{ name, value string }{
		{"name", f.Name},
		{"description", f.Description},
		{"user.role", f.User.Role},
		{"user.role_sep", f.User.RoleSep},
		{"user.pre", f.User.Pre},
		{"user.suf", f.User.Suf},
		{"user.role_space", orDefault(f.User.RoleSpace, "")},
		{"user.text_space", orDefault(f.User.TextSpace, "")},
		{"agent.role", f.Agent.Role},
		{"agent.role_sep", f.Agent.RoleSep},
		{"agent.pre", f.Agent.Pre},
		{"agent.suf", f.Agent.Suf},
		{"agent.role_space", orDefault(f.Agent.RoleSpace, "")},
		{"agent.text_space", orDefault(f.Agent.TextSpace, "")},
		{"system_prompt.pre", f.SystemPrompt.Pre},
		{"system_prompt.suf", f.SystemPrompt.Suf},
		{"system_prompt.text_end", orDefault(f.SystemPrompt.TextEnd, "")},
		{"prompt.pre", f.Prompt.Pre},
		{"prompt.suf", f.Prompt.Suf},
		{"prompt.cue_pre", orDefault(f.Prompt.CuePre, "")},
	}
	for _, field := range fields {
		if len(field.value) > maxFieldBytes {
			return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalidFormat, field.name, maxFieldBytes)
		}
		if !utf8.ValidString(field.value) {
			return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidFormat, field.name)
		}
		if strings.ContainsRune(field.value, 0) {
			return fmt.Errorf("%w: %s contains a NUL character", ErrInvalidFormat, field.name)
		}
	}
	switch f.SystemPrompt.placement() {
	case PlaceStart, PlaceFirstUser, PlaceLastUser:
	default:
		return fmt.Errorf("%w: system_prompt.placement %q is not one of %q, %q, %q",
			ErrInvalidFormat, f.SystemPrompt.Placement, PlaceStart, PlaceFirstUser, PlaceLastUser)
	}
	if len(f.Stop) > maxStops {
		return fmt.Errorf("%w: more than %d stop patterns", ErrInvalidFormat, maxStops)
	}
	for i, s := range f.Stop {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("%w: stop pattern %d is blank", ErrInvalidFormat, i)
		}
		if len(s) > maxFieldBytes || !utf8.ValidString(s) {
			return fmt.Errorf("%w: stop pattern %d is too long or not UTF-8", ErrInvalidFormat, i)
		}
	}
	// A model reading the prompt must be able to tell who said what.
	if f.User.opening() == f.Agent.opening() && f.User.Suf == f.Agent.Suf {
		return fmt.Errorf("%w: user and agent turns would be laid out identically", ErrInvalidFormat)
	}
	return nil
}

// ParseFormat reads a prompt-format config from JSON. Unknown fields are refused, so that
// a misspelt field does not silently fall back to a default.
func ParseFormat(data []byte) (Format, error) {
	if len(data) > maxFormatBytes {
		return Format{}, fmt.Errorf("%w: config is larger than %d bytes", ErrInvalidFormat, maxFormatBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f Format
	if err := dec.Decode(&f); err != nil {
		return Format{}, fmt.Errorf("%w: %w", ErrInvalidFormat, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Format{}, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidFormat)
	}
	if err := f.Validate(); err != nil {
		return Format{}, err
	}
	return f, nil
}

// LoadFormat loads a prompt format by name ("chatml", one of BuiltinFormats) or by path
// (anything containing a path separator or ending in ".json").
func LoadFormat(nameOrPath string) (Format, error) {
	if strings.ContainsRune(nameOrPath, '/') || strings.ContainsRune(nameOrPath, filepath.Separator) ||
		strings.HasSuffix(nameOrPath, ".json") {
		return LoadFormatFile(nameOrPath)
	}
	return BuiltinFormat(nameOrPath)
}

// LoadFormatFile loads a prompt format from a JSON file.
func LoadFormatFile(file string) (Format, error) {
	// A device or a FIFO named by a broken config would block the read (or never end).
	fh, err := regularfile.Open(file)
	if err != nil {
		return Format{}, fmt.Errorf("dialogue: prompt format: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFormatBytes+1))
	if err != nil {
		return Format{}, fmt.Errorf("dialogue: prompt format %s: %w", file, err)
	}
	f, err := ParseFormat(data)
	if err != nil {
		return Format{}, fmt.Errorf("dialogue: prompt format %s: %w", file, err)
	}
	if f.Name == "" {
		f.Name = strings.TrimSuffix(filepath.Base(file), ".json")
	}
	return f, nil
}

// BuiltinFormat returns the shipped format called name (configs/prompts/<name>.json).
func BuiltinFormat(name string) (Format, error) {
	if name == "" || strings.ContainsAny(name, `/\.`) {
		return Format{}, fmt.Errorf("dialogue: %w %q", ErrUnknownFormat, name)
	}
	data, err := fs.ReadFile(prompts.FS, name+".json")
	if err != nil {
		return Format{}, fmt.Errorf("dialogue: %w %q (shipped: %s)", ErrUnknownFormat, name,
			strings.Join(BuiltinFormats(), ", "))
	}
	f, err := ParseFormat(data)
	if err != nil {
		return Format{}, fmt.Errorf("dialogue: shipped prompt format %s: %w", name, err)
	}
	if f.Name == "" {
		f.Name = name
	}
	return f, nil
}

// BuiltinFormats returns the names of the shipped formats, sorted.
func BuiltinFormats() []string {
	entries, err := fs.ReadDir(prompts.FS, ".")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); path.Ext(n) == ".json" {
			names = append(names, strings.TrimSuffix(n, ".json"))
		}
	}
	sort.Strings(names)
	return names
}
