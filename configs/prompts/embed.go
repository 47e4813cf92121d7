// Package prompts ships Parley's prompt-format configs (one JSON file per chat template) inside
// the binary, so that package dialogue can load them by name wherever the agent runs.
package prompts

import "embed"

// FS holds the shipped configs, named <format>.json. It is read-only.
//
//go:embed *.json
var FS embed.FS
