// Package configdoc documents a YAML configuration from its Go types: it prints a
// configuration as YAML with a one-line comment above every key and the default beside
// every value that differs from it, and writes a Markdown reference of the keys. The
// comments come from the fields' doc comments, which Go does not keep at run time: a
// generator (Collect and Generate, run by go generate) writes them into a Go file of
// the configuration's package, and a test there checks that the file is current.
package configdoc

import (
	"encoding"
	"fmt"
	"io"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Docs are the one-line comments of configuration keys, keyed by the Go field they
// decode into: "import/path.Type.Field".
type Docs map[string]string

// entry is one key of a configuration.
type entry struct {
	path    []string // YAML keys from the top
	doc     string
	value   reflect.Value
	def     reflect.Value
	section bool // a nested mapping; its keys follow it
}

// entries lists the keys of the struct v (with its defaults def) in the order of their
// fields, every section followed by its keys.
func entries(v, def reflect.Value, docs Docs, path []string) ([]entry, error) {
	t := v.Type()
	var out []entry
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts := parseTag(f.Tag.Get("yaml"))
		if name == "-" {
			continue
		}
		if opts.inline {
			inner, err := entries(v.Field(i), def.Field(i), docs, path)
			if err != nil {
				return nil, err
			}
			out = append(out, inner...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		id := t.PkgPath() + "." + t.Name() + "." + f.Name
		doc, ok := docs[id]
		if !ok {
			return nil, fmt.Errorf("configdoc: no comment for %s (%s): the generated docs are out of date; run go generate", strings.Join(append(path, name), "."), id)
		}
		e := entry{path: append(append([]string(nil), path...), name), doc: doc, value: v.Field(i), def: def.Field(i)}
		if isSection(f.Type) {
			e.section = true
			inner, err := entries(v.Field(i), def.Field(i), docs, e.path)
			if err != nil {
				return nil, err
			}
			out = append(append(out, e), inner...)
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// isSection reports whether values of t are written as a nested mapping of keys.
func isSection(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	p := reflect.PointerTo(t)
	return !t.Implements(marshalerType) && !p.Implements(marshalerType) && !p.Implements(textMarshalerType)
}

var (
	marshalerType     = reflect.TypeFor[yaml.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// YAML writes cfg, a struct, as YAML: every key with its one-line comment above it, and
// the default (the value in def) beside every value that differs. header, when set, is
// the comment at the top.
func YAML(w io.Writer, cfg, def any, docs Docs, header string) error {
	v, d := reflect.ValueOf(cfg), reflect.ValueOf(def)
	if v.Type() != d.Type() || v.Kind() != reflect.Struct {
		return fmt.Errorf("configdoc: want two structs of one type, got %T and %T", cfg, def)
	}
	list, err := entries(v, d, docs, nil)
	if err != nil {
		return err
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	mappings := map[string]*yaml.Node{"": root}
	for _, e := range list {
		parent := mappings[strings.Join(e.path[:len(e.path)-1], ".")]
		key := &yaml.Node{Kind: yaml.ScalarNode, Value: e.path[len(e.path)-1], HeadComment: e.doc}
		var val *yaml.Node
		if e.section {
			val = &yaml.Node{Kind: yaml.MappingNode}
			mappings[strings.Join(e.path, ".")] = val
		} else {
			if val, err = valueNode(e.value); err != nil {
				return fmt.Errorf("configdoc: %s: %w", strings.Join(e.path, "."), err)
			}
			// Compared as written: an empty list is its default, nil or not.
			now, err := flowText(e.value)
			if err != nil {
				return fmt.Errorf("configdoc: %s: %w", strings.Join(e.path, "."), err)
			}
			def, err := flowText(e.def)
			if err != nil {
				return fmt.Errorf("configdoc: %s: %w", strings.Join(e.path, "."), err)
			}
			if now != def {
				val.LineComment = "default: " + def
			}
		}
		parent.Content = append(parent.Content, key, val)
	}
	doc := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: header, Content: []*yaml.Node{root}}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("configdoc: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("configdoc: %w", err)
	}
	// A blank line before every top-level key's comment sets the sections apart.
	lines := strings.SplitAfter(b.String(), "\n")
	var out strings.Builder
	for i, line := range lines {
		if i > 0 && strings.HasPrefix(line, "#") && !strings.HasPrefix(lines[i-1], "#") && lines[i-1] != "\n" {
			out.WriteString("\n")
		}
		out.WriteString(line)
	}
	_, err = io.WriteString(w, out.String())
	return err
}

// valueNode encodes a value, lists and mappings in flow style ([a, b], {k: v}).
func valueNode(v reflect.Value) (*yaml.Node, error) {
	n := &yaml.Node{}
	if err := n.Encode(v.Interface()); err != nil {
		return nil, err
	}
	if n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode {
		n.Style = yaml.FlowStyle
	}
	return n, nil
}

// flowText is a value as YAML on one line.
func flowText(v reflect.Value) (string, error) {
	n, err := valueNode(v)
	if err != nil {
		return "", err
	}
	b, err := yaml.Marshal(n)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Markdown writes the reference of the keys of def, a struct: a table of the top-level
// keys that are values, then a section per top-level mapping with a table of its keys
// (nested ones dotted), each key with its default and its comment.
func Markdown(w io.Writer, def any, docs Docs) error {
	d := reflect.ValueOf(def)
	if d.Kind() != reflect.Struct {
		return fmt.Errorf("configdoc: want a struct, got %T", def)
	}
	list, err := entries(d, d, docs, nil)
	if err != nil {
		return err
	}
	var b strings.Builder
	const head = "| key | default | what it is |\n|---|---|---|\n"
	row := func(e entry, from int) error {
		val := ""
		if !e.section {
			text, err := flowText(e.def)
			if err != nil {
				return fmt.Errorf("configdoc: %s: %w", strings.Join(e.path, "."), err)
			}
			val = code(text)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", code(strings.Join(e.path[from:], ".")), val, cell(e.doc))
		return nil
	}
	b.WriteString(head)
	for _, e := range list {
		if len(e.path) == 1 && !e.section {
			if err := row(e, 0); err != nil {
				return err
			}
		}
	}
	for _, e := range list {
		if len(e.path) != 1 || !e.section {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n%s", code(e.path[0]), e.doc, head)
		for _, k := range list {
			if len(k.path) > 1 && k.path[0] == e.path[0] {
				if err := row(k, 1); err != nil {
					return err
				}
			}
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// code writes s as Markdown code.
func code(s string) string {
	s = cell(s)
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// cell escapes what would end a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

type tagOptions struct{ inline bool }

// parseTag splits a yaml struct tag into its key and options.
func parseTag(tag string) (string, tagOptions) {
	name, rest, _ := strings.Cut(tag, ",")
	var o tagOptions
	for _, opt := range strings.Split(rest, ",") {
		if opt == "inline" {
			o.inline = true
		}
	}
	return name, o
}
