// Package modelstore knows the real models Parley downloads for its users (a whisper model,
// an instruction-tuned GGUF, the Silero VAD), fetches them with resume and a progress bar,
// and verifies their size and sha256.
package modelstore

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Kind is what a model is used for.
type Kind string

// Model kinds.
const (
	KindASR Kind = "asr"
	KindLLM Kind = "llm"
	KindVAD Kind = "vad"
)

// Model is one downloadable model file.
type Model struct {
	Name        string `json:"name"`
	Kind        Kind   `json:"kind"`
	File        string `json:"file"` // file name in the models directory
	URL         string `json:"url"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	License     string `json:"license,omitempty"`
	Description string `json:"description,omitempty"`
	// Default marks the model the agent uses for its kind when nothing else is configured.
	Default bool `json:"default,omitempty"`
	// Demo marks the models of the README's demo (configs/demo.yaml), which
	// 'agent models pull --demo' fetches.
	Demo bool `json:"demo,omitempty"`
	// PromptFormat names the prompt-format config an LLM needs (configs/prompts/NAME.json).
	PromptFormat string `json:"prompt_format,omitempty"`
}

// Catalog is a set of models by name.
type Catalog []Model

// Builtin returns the models Parley offers. Sizes and checksums are those of the files
// their hosts publish; a download that does not match them is rejected.
func Builtin() Catalog {
	return Catalog{
		{
			Name: "whisper-base.en", Kind: KindASR, File: "ggml-base.en.bin",
			URL:  "https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-base.en.bin",
			Size: 147964211, SHA256: "a03779c86df3323075f5e796cb2ce5029f00ec8869eee3fdfb897afe36c6d002",
			License: "MIT", Description: "whisper base, English only: better accuracy; partials keep up on 2 cores only while the LLM is idle (set asr.whisper.model on 4 cores or more)",
		},
		{
			Name: "whisper-tiny.en", Kind: KindASR, File: "ggml-tiny.en.bin", Default: true,
			URL:  "https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-tiny.en.bin",
			Size: 77704715, SHA256: "921e4cf8686fdd993dcd081a5da5b6c365bfde1162e72b08d75ac75289920b1f",
			License: "MIT", Description: "whisper tiny, English only: the default, the one whose partials keep up on 2 cores while the LLM generates (docs/PERFORMANCE.md); lower accuracy than base",
		},
		{
			Name: "whisper-small.en", Kind: KindASR, File: "ggml-small.en.bin",
			URL:  "https://huggingface.co/ggerganov/whisper.cpp/resolve/main/ggml-small.en.bin",
			Size: 487614201, SHA256: "c6138d6d58ecc8322097e0f987c32f1be8bb0a18532a3f88f734d1bbf9c41e5d",
			License: "MIT", Description: "whisper small, English only: more accurate, needs a fast CPU or a GPU",
		},
		{
			Name: "qwen2.5-0.5b-instruct", Kind: KindLLM, File: "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", Default: true,
			URL:  "https://huggingface.co/bartowski/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf",
			Size: 397808192, SHA256: "6eb923e7d26e9cea28811e1a8e852009b21242fb157b26149d3b188f3a8c8653",
			License: "Apache-2.0", Description: "Qwen2.5 0.5B Instruct, Q4_K_M: small and quick enough to answer in real time on a laptop CPU",
			PromptFormat: "chatml",
		},
		{
			Name: "silero-vad", Kind: KindVAD, File: "ggml-silero-v6.2.0.bin", Default: true,
			URL:  "https://huggingface.co/ggml-org/whisper-vad/resolve/main/ggml-silero-v6.2.0.bin",
			Size: 885098, SHA256: "2aa269b785eeb53a82983a20501ddf7c1d9c48e33ab63a41391ac6c9f7fb6987",
			License: "MIT", Description: "Silero VAD v6.2.0 in whisper.cpp's ggml format", Demo: true,
		},
		{
			// llama.cpp's own tests fetch this file (ggml-org/models, tinyllamas/).
			Name: "stories260k", Kind: KindLLM, File: "stories260K.gguf",
			URL:  "https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/stories260K.gguf",
			Size: 1185408, SHA256: "50379d33a1b70b29d58de4d4a9289d6433283720fc17983a33cfe76518a06435",
			License: "MIT", Description: "stories260K, a 260K-parameter llama trained on TinyStories: the demo's LLM; it tells children's stories, it does not follow instructions",
			PromptFormat: "plain", Demo: true,
		},
	}
}

// Defaults returns the default model of every kind.
func (c Catalog) Defaults() Catalog {
	var out Catalog
	for _, m := range c {
		if m.Default {
			out = append(out, m)
		}
	}
	return out
}

// Demos returns the models of the README's demo.
func (c Catalog) Demos() Catalog {
	var out Catalog
	for _, m := range c {
		if m.Demo {
			out = append(out, m)
		}
	}
	return out
}

// PullCommand is the command that fetches the model file at path: the catalog's model
// of that file name ('agent models pull --demo' for the demo's own), else the defaults.
func (c Catalog) PullCommand(path string) string {
	for _, m := range c {
		if filepath.Base(path) != m.File {
			continue
		}
		if m.Demo && !m.Default {
			return "agent models pull --demo"
		}
		return "agent models pull " + m.Name
	}
	return "agent models pull"
}

// Find returns the model called name.
func (c Catalog) Find(name string) (Model, error) {
	for _, m := range c {
		if m.Name == name {
			return m, nil
		}
	}
	names := make([]string, 0, len(c))
	for _, m := range c {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return Model{}, fmt.Errorf("modelstore: no model %q (known: %s)", name, strings.Join(names, ", "))
}

// Default returns the default model of a kind.
func (c Catalog) Default(kind Kind) (Model, bool) {
	for _, m := range c {
		if m.Kind == kind && m.Default {
			return m, true
		}
	}
	return Model{}, false
}

// DefaultFile returns the file name of the built-in catalog's default model of a kind.
func DefaultFile(kind Kind) string {
	m, _ := Builtin().Default(kind)
	return m.File
}

// WithMirror returns the catalog with every URL's scheme and host replaced by mirror's
// (for example "http://127.0.0.1:8080"), keeping the path: for mirrors and for tests
// against a local server.
func (c Catalog) WithMirror(mirror string) Catalog {
	mirror = strings.TrimRight(mirror, "/")
	out := make(Catalog, len(c))
	for i, m := range c {
		if rest, ok := strings.CutPrefix(m.URL, "https://"); ok {
			if slash := strings.IndexByte(rest, '/'); slash >= 0 {
				m.URL = mirror + rest[slash:]
			}
		}
		out[i] = m
	}
	return out
}
