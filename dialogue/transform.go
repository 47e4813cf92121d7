package dialogue

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// InputTransform rewrites the user's text before it is stored (ASR clean-up, word
// corrections, removal of template control strings).
type InputTransform interface {
	TransformInput(text string) string
}

// InputFunc adapts a function to InputTransform.
type InputFunc func(string) string

// TransformInput implements InputTransform.
func (f InputFunc) TransformInput(s string) string { return f(s) }

// InputChain applies its transforms in order.
type InputChain []InputTransform

// TransformInput implements InputTransform.
func (c InputChain) TransformInput(s string) string {
	for _, t := range c {
		s = t.TransformInput(s)
	}
	return s
}

// CollapseSpaces trims the text and turns every run of white space into one space.
func CollapseSpaces() InputTransform {
	return InputFunc(func(s string) string { return strings.Join(strings.Fields(s), " ") })
}

// ReplaceText replaces each old string with its new one (pairs as for
// strings.NewReplacer), for example to correct words the recogniser keeps getting wrong.
func ReplaceText(oldNew ...string) InputTransform {
	r := strings.NewReplacer(oldNew...)
	return InputFunc(r.Replace)
}

// StripControlStrings removes the format's control strings ("[INST]", "<|im_start|>",
// "<<SYS>>", ...) from user text, so that what the user says cannot open or close turns
// in the prompt. Control strings are the format's markers that contain one of "<>[]|".
func StripControlStrings(f Format) InputTransform {
	markers := controlStrings(f)
	if len(markers) == 0 {
		return InputFunc(func(s string) string { return s })
	}
	pairs := make([]string, 0, 2*len(markers))
	for _, m := range markers {
		pairs = append(pairs, m, "")
	}
	r := strings.NewReplacer(pairs...)
	return InputFunc(func(s string) string {
		// Removing one marker can join the halves of another ("[IN[INST]ST]").
		for range 8 {
			next := r.Replace(s)
			if next == s {
				break
			}
			s = next
		}
		return s
	})
}

func controlStrings(f Format) []string {
	candidates := []string{
		f.User.Pre, f.User.Suf, f.User.RoleSep, f.Agent.Pre, f.Agent.Suf, f.Agent.RoleSep,
		f.SystemPrompt.Pre, f.SystemPrompt.Suf, f.Prompt.Pre, f.Prompt.Suf,
	}
	candidates = append(candidates, f.Stop...)
	seen := map[string]bool{}
	var out []string
	for _, c := range candidates {
		for _, field := range strings.Fields(c) {
			// "</s><s>" is two markers; "<<SYS>>" is one.
			for _, part := range strings.Split(strings.ReplaceAll(field, "><", ">\x00<"), "\x00") {
				if len(part) >= 3 && strings.ContainsAny(part, "<>[]|") && !seen[part] {
					seen[part] = true
					out = append(out, part)
				}
			}
		}
	}
	// Longest first, so that "</s>" is removed whole rather than leaving "/".
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// StreamTransform rewrites the model's output as it streams, piece by piece (the hook
// modules/llm accepts). Push returns the text that is final so far; Flush returns the rest
// at the end of the stream. A transform serves one stream at a time.
type StreamTransform interface {
	Push(piece string) string
	Flush() string
}

// KeywordFilter removes keywords from a token stream, also when a keyword is split
// across pieces. It holds back at most the longest keyword's length minus one byte (the
// look-ahead window), plus an incomplete UTF-8 sequence at the end of a piece, so the
// text it lets through is always valid where the input is. At each position the longest
// keyword that matches is removed (leftmost-longest), exactly as if the whole text had
// been filtered at once.
type KeywordFilter struct {
	keywords    []string
	replacement string
	pending     string
}

// NewKeywordFilter returns a filter that removes the keywords (empty ones, and ones that
// are not valid UTF-8, which could split a character, are ignored).
func NewKeywordFilter(keywords ...string) *KeywordFilter {
	return NewKeywordReplacer("", keywords...)
}

// NewKeywordReplacer returns a filter that replaces each keyword by replacement.
func NewKeywordReplacer(replacement string, keywords ...string) *KeywordFilter {
	k := &KeywordFilter{replacement: replacement}
	for _, kw := range keywords {
		if kw != "" && utf8.ValidString(kw) {
			k.keywords = append(k.keywords, kw)
		}
	}
	return k
}

// Push implements StreamTransform.
func (k *KeywordFilter) Push(piece string) string {
	k.pending += piece
	return k.process(false)
}

// Flush implements StreamTransform.
func (k *KeywordFilter) Flush() string { return k.process(true) }

// Reset forgets held-back text, to reuse the filter for another stream.
func (k *KeywordFilter) Reset() { k.pending = "" }

func (k *KeywordFilter) process(final bool) string {
	p := k.pending
	var out strings.Builder
	i := 0
scan:
	for i < len(p) {
		best := 0
		for _, kw := range k.keywords {
			rest := p[i:]
			switch {
			case strings.HasPrefix(rest, kw):
				best = max(best, len(kw))
			case !final && len(rest) < len(kw) && strings.HasPrefix(kw, rest):
				// A keyword (longer than any full match here) may still complete.
				break scan
			}
		}
		if best > 0 {
			out.WriteString(k.replacement)
			i += best
			continue
		}
		out.WriteByte(p[i])
		i++
	}
	k.pending = p[i:]
	emitted := out.String()
	if !final {
		if cut := incompleteTail(emitted); cut < len(emitted) {
			k.pending = emitted[cut:] + k.pending
			emitted = emitted[:cut]
		}
	}
	return emitted
}

// incompleteTail returns where an incomplete UTF-8 sequence at the end of s begins, or
// len(s).
func incompleteTail(s string) int {
	for back := 1; back <= utf8.UTFMax && back <= len(s); back++ {
		at := len(s) - back
		if utf8.RuneStart(s[at]) {
			if !utf8.FullRuneInString(s[at:]) {
				return at
			}
			return len(s)
		}
	}
	return len(s)
}

// Transcript turns utterances into plain text and back: one "Role: text" line per
// utterance, continuation lines of multi-line texts indented by two spaces, optionally
// with the turn id first ("[3] User: hello"). It is the history transform used for
// summaries, exports and imports.
type Transcript struct {
	Roles Roles
	// InterruptedMark is appended to interrupted agent texts, and recognised on decoding
	// ("" leaves interruptions out).
	InterruptedMark string
	// TurnIDs writes and requires the "[turn] " prefix. Without it, decoding numbers the
	// utterances 1, 2, 3, ...
	TurnIDs bool
}

// TranscriptLines writes utterances as "Role: text" lines, interrupted agent turns marked
// "(interrupted)".
func TranscriptLines(utts []Utterance, roles Roles) string {
	return Transcript{Roles: roles, InterruptedMark: " (interrupted)"}.Encode(utts)
}

// Encode writes the utterances.
func (t Transcript) Encode(utts []Utterance) string {
	var b strings.Builder
	for _, u := range utts {
		text := strings.ReplaceAll(u.Text, "\r\n", "\n")
		if u.Interrupted && u.Speaker == Agent {
			text += t.InterruptedMark
		}
		if t.TurnIDs {
			b.WriteString("[" + strconv.Itoa(u.TurnID) + "] ")
		}
		b.WriteString(t.Roles.Name(u.Speaker))
		b.WriteByte(':')
		for i, line := range strings.Split(text, "\n") {
			if i > 0 {
				b.WriteString("\n  ")
			} else if line != "" {
				b.WriteByte(' ')
			}
			b.WriteString(line)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ErrInvalidTranscript is wrapped by Decode's errors.
var ErrInvalidTranscript = errors.New("invalid transcript")

const maxTranscriptBytes = 16 << 20

// Decode reads what Encode writes. Blank lines between utterances are ignored.
func (t Transcript) Decode(text string) ([]Utterance, error) {
	if len(text) > maxTranscriptBytes {
		return nil, fmt.Errorf("dialogue: %w: larger than %d bytes", ErrInvalidTranscript, maxTranscriptBytes)
	}
	if t.Roles.User == "" || t.Roles.Agent == "" || t.Roles.User == t.Roles.Agent {
		return nil, fmt.Errorf("dialogue: %w: roles %q and %q cannot be told apart", ErrInvalidTranscript, t.Roles.User, t.Roles.Agent)
	}
	// Try the longer role name first, in case one is a prefix of the other.
	roles := []Speaker{User, Agent}
	if len(t.Roles.Agent) > len(t.Roles.User) {
		roles = []Speaker{Agent, User}
	}
	var out []Utterance
	var texts []*strings.Builder
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if cont, ok := strings.CutPrefix(line, "  "); ok && len(out) > 0 {
			texts[len(texts)-1].WriteString("\n" + cont)
			continue
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		turn := len(out) + 1
		if t.TurnIDs {
			rest, ok := strings.CutPrefix(line, "[")
			end := strings.Index(rest, "] ")
			if !ok || end <= 0 {
				return nil, fmt.Errorf("dialogue: %w: line %d: missing [turn] prefix", ErrInvalidTranscript, n+1)
			}
			id, err := strconv.Atoi(rest[:end])
			if err != nil || id < 0 || strings.ContainsAny(rest[:end], "+-") {
				return nil, fmt.Errorf("dialogue: %w: line %d: bad turn id %q", ErrInvalidTranscript, n+1, rest[:end])
			}
			turn, line = id, rest[end+2:]
		}
		var speaker Speaker
		var body string
		for _, s := range roles {
			if rest, ok := strings.CutPrefix(line, t.Roles.Name(s)+":"); ok {
				speaker = s
				body = strings.TrimPrefix(rest, " ")
				break
			}
		}
		if speaker == 0 {
			return nil, fmt.Errorf("dialogue: %w: line %d: no known role", ErrInvalidTranscript, n+1)
		}
		if len(out) > 0 && turn < out[len(out)-1].TurnID {
			return nil, fmt.Errorf("dialogue: %w: line %d: turn ids decrease", ErrInvalidTranscript, n+1)
		}
		var sb strings.Builder
		sb.WriteString(body)
		texts = append(texts, &sb)
		out = append(out, Utterance{Speaker: speaker, TurnID: turn})
	}
	for i := range out {
		text := texts[i].String()
		if t.InterruptedMark != "" && out[i].Speaker == Agent {
			if cut, ok := strings.CutSuffix(text, t.InterruptedMark); ok {
				text = cut
				out[i].Interrupted = true
			}
		}
		out[i].Text = text
	}
	return out, nil
}
