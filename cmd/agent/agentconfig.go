package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/parley-voice/parley/pipeline"
)

// configFlag adds --config to a subcommand.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "agent config file (YAML); default $PARLEY_CONFIG or ~/.config/parley/config.yaml if present, else the built-in defaults")
}

// loadAgentConfig reads the agent's configuration: the named file, else the user's
// config file if there is one, else the defaults for the downloaded models.
func loadAgentConfig(a *app, path string) (pipeline.Config, string, error) {
	base := pipeline.Default(a.paths)
	if path == "" {
		if _, err := os.Stat(a.paths.Config); err == nil {
			path = a.paths.Config
		}
	}
	if path == "" {
		if err := base.Validate(); err != nil {
			return pipeline.Config{}, "", err
		}
		return base, "built-in defaults", nil
	}
	cfg, err := pipeline.Load(path, base)
	if err != nil {
		if errors.Is(err, pipeline.ErrInvalidConfig) {
			return pipeline.Config{}, "", fmt.Errorf("%s: %w", path, err)
		}
		return pipeline.Config{}, "", err
	}
	return cfg, path, nil
}
