// Package protocol holds prompt protocols: a message template with named input variables
// plus a parser that encodes a state into a prompt and decodes the model's output. It
// ships the self-ask protocol (Press et al., 2022), which the agent uses as a "think before
// answering" mode where only the final answer is spoken.
package protocol

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Protocol encodes a state S into a prompt (with the stop patterns that end the model's
// part) and decodes the model's output into a decision D.
type Protocol[S, D any] interface {
	Encode(state S) (prompt string, stop []string, err error)
	Decode(state S, output string) (D, error)
}

// Completer generates text from a raw prompt (modules/llm's engine, adapted).
type Completer interface {
	Complete(ctx context.Context, prompt string, maxTokens int, stop []string) (string, error)
}

// ErrInvalidTemplate is wrapped by ParseTemplate's and Render's errors.
var ErrInvalidTemplate = errors.New("invalid template")

const maxTemplateBytes = 1 << 20

// Template is a message template with named variables written {name} (letters, digits
// and '_', not starting with a digit); "{{" and "}}" stand for literal braces.
type Template struct {
	parts []templatePart
	vars  []string
}

type templatePart struct {
	literal  string
	variable string // "" for a literal part
}

// ParseTemplate parses a template.
func ParseTemplate(text string) (Template, error) {
	if len(text) > maxTemplateBytes {
		return Template{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidTemplate, maxTemplateBytes)
	}
	var t Template
	seen := map[string]bool{}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, templatePart{literal: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == '{' && strings.HasPrefix(text[i:], "{{"):
			lit.WriteByte('{')
			i += 2
		case c == '}' && strings.HasPrefix(text[i:], "}}"):
			lit.WriteByte('}')
			i += 2
		case c == '}':
			return Template{}, fmt.Errorf("%w: unmatched '}' at byte %d", ErrInvalidTemplate, i)
		case c == '{':
			end := strings.IndexByte(text[i+1:], '}')
			if end < 0 {
				return Template{}, fmt.Errorf("%w: unclosed '{' at byte %d", ErrInvalidTemplate, i)
			}
			name := text[i+1 : i+1+end]
			if !validName(name) {
				return Template{}, fmt.Errorf("%w: bad variable name %q at byte %d", ErrInvalidTemplate, name, i)
			}
			flush()
			t.parts = append(t.parts, templatePart{variable: name})
			if !seen[name] {
				seen[name] = true
				t.vars = append(t.vars, name)
			}
			i += end + 2
		default:
			lit.WriteByte(c)
			i++
		}
	}
	flush()
	return t, nil
}

// MustParseTemplate is ParseTemplate for templates written in the program.
func MustParseTemplate(text string) Template {
	t, err := ParseTemplate(text)
	if err != nil {
		panic(err)
	}
	return t
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Variables returns the template's variables in order of first use.
func (t Template) Variables() []string { return append([]string(nil), t.vars...) }

// Has reports whether the template uses variable name.
func (t Template) Has(name string) bool {
	for _, v := range t.vars {
		if v == name {
			return true
		}
	}
	return false
}

// Render fills the template. Every variable must have a value; values for variables the
// template does not use are ignored.
func (t Template) Render(values map[string]string) (string, error) {
	for _, v := range t.vars {
		if _, ok := values[v]; !ok {
			return "", fmt.Errorf("%w: no value for {%s}", ErrInvalidTemplate, v)
		}
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.variable != "" {
			b.WriteString(values[p.variable])
		} else {
			b.WriteString(p.literal)
		}
	}
	return b.String(), nil
}

// String writes the template back in its source form.
func (t Template) String() string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.variable != "" {
			b.WriteString("{" + p.variable + "}")
		} else {
			b.WriteString(strings.NewReplacer("{", "{{", "}", "}}").Replace(p.literal))
		}
	}
	return b.String()
}
