// Package userdirs says where Parley keeps what belongs to the user: downloaded models,
// saved sessions, logs, the default config file, and the demos' test assets. (The agent's
// YAML configuration itself is package pipeline's; configs/ holds example files.)
package userdirs

import (
	"os"
	"path/filepath"
)

// Paths are the directories Parley reads and writes.
type Paths struct {
	// Models holds downloaded model files ($PARLEY_MODELS, else $XDG_DATA_HOME/parley/models).
	Models string
	// Sessions holds saved sessions ($PARLEY_SESSIONS, else $XDG_DATA_HOME/parley/sessions).
	Sessions string
	// Logs holds log files and replay outputs by default ($XDG_STATE_HOME/parley).
	Logs string
	// Config is the default config file ($PARLEY_CONFIG, else $XDG_CONFIG_HOME/parley/config.yaml).
	Config string
	// Shared is the folder of test assets used by demos ($PARLEY_SHARED, else ../shared
	// beside the project when the agent runs from a checkout).
	Shared string
}

// FromEnv resolves Paths from the environment.
func FromEnv() Paths {
	home, _ := os.UserHomeDir()
	p := resolve(os.Getenv, home)
	if p.Shared == "" {
		p.Shared = findShared()
	}
	return p
}

// Documented returns the paths of a user who set none of the variables, with the home
// folder written "~": what the documentation shows.
func Documented() Paths {
	return resolve(func(string) string { return "" }, "~")
}

// resolve computes Paths from the variables getenv returns, with home as the fallback
// for the XDG folders. Shared is only what PARLEY_SHARED says.
func resolve(getenv func(string) string, home string) Paths {
	or := func(name, fallback string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return fallback
	}
	xdg := func(env, fallback string) string { return or(env, filepath.Join(home, fallback)) }
	data := filepath.Join(xdg("XDG_DATA_HOME", ".local/share"), "parley")
	return Paths{
		Models:   or("PARLEY_MODELS", filepath.Join(data, "models")),
		Sessions: or("PARLEY_SESSIONS", filepath.Join(data, "sessions")),
		Logs:     filepath.Join(xdg("XDG_STATE_HOME", ".local/state"), "parley"),
		Config:   or("PARLEY_CONFIG", filepath.Join(xdg("XDG_CONFIG_HOME", ".config"), "parley", "config.yaml")),
		Shared:   getenv("PARLEY_SHARED"),
	}
}

// ModelFile returns where the model file called file is: in the shared test assets
// (models/) when they hold it, as in CI and developers' checkouts, else in the models
// folder, where 'agent models pull' puts it (whether or not it is there yet).
func (p Paths) ModelFile(file string) string {
	if p.Shared != "" {
		shared := filepath.Join(p.Shared, "models", file)
		if _, err := os.Stat(shared); err == nil {
			return shared
		}
	}
	return filepath.Join(p.Models, file)
}

// findShared looks for ../shared beside the checkout that holds the working directory,
// else beside the checkout that holds the running binary (scripts/bin/agent builds it
// into the checkout's .build/, and the installed parley command runs it from anywhere).
func findShared() string {
	if dir, err := os.Getwd(); err == nil {
		if shared := sharedBesideCheckout(dir); shared != "" {
			return shared
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return ""
	}
	return sharedBesideCheckout(filepath.Dir(exe))
}

// sharedBesideCheckout walks up from dir to the checkout holding it (the folder with
// go.mod) and returns its ../shared when that is a folder, else "".
func sharedBesideCheckout(dir string) string {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			cand := filepath.Join(dir, "..", "shared")
			if st, err := os.Stat(cand); err == nil && st.IsDir() {
				return filepath.Clean(cand)
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
