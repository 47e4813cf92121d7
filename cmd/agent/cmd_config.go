package main

import (
	"context"

	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/userdirs"
)

func configCommand() command {
	return command{
		Name:    "config",
		Summary: "print the effective configuration: every key with its comment, and its default where it differs",
		Run:     runConfig,
	}
}

func runConfig(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "config", "")
	cfgPath := configFlag(fs)
	markdown := fs.Bool("markdown", false, "write the reference of every key with its built-in default in Markdown instead (docs/CONFIG.md)")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("config takes no arguments (the file is --config FILE)")
	}
	if *markdown {
		if *cfgPath != "" {
			return usageErrorf("--markdown documents the built-in defaults; it takes no --config")
		}
		// The documented folders (~/.local/share/parley/...), not this user's.
		return pipeline.WriteConfigMarkdown(a.stdout, pipeline.Default(userdirs.Documented()))
	}
	cfg, from, err := loadAgentConfig(a, *cfgPath)
	if err != nil {
		return err
	}
	if *cfgPath == "" && from != a.paths.Config {
		from = "" // the built-in defaults alone
	}
	return pipeline.WriteConfigYAML(a.stdout, cfg, pipeline.Default(a.paths), from)
}
