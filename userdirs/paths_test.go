package userdirs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDocumented(t *testing.T) {
	p := Documented()
	for _, c := range []struct{ got, want string }{
		{p.Models, "~/.local/share/parley/models"},
		{p.Sessions, "~/.local/share/parley/sessions"},
		{p.Logs, "~/.local/state/parley"},
		{p.Config, "~/.config/parley/config.yaml"},
		{p.Shared, ""},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestResolve(t *testing.T) {
	env := map[string]string{"XDG_DATA_HOME": "/data", "PARLEY_SESSIONS": "/s", "XDG_CONFIG_HOME": "/c"}
	p := resolve(func(k string) string { return env[k] }, "/home/u")
	want := Paths{Models: "/data/parley/models", Sessions: "/s", Logs: "/home/u/.local/state/parley", Config: "/c/parley/config.yaml"}
	if p != want {
		t.Errorf("got %+v, want %+v", p, want)
	}
}

// TestModelFile: a model file comes from the shared test assets when they hold it, else
// from the models folder, present or not.
func TestModelFile(t *testing.T) {
	shared, models := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(shared, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shared, "models", "in-shared.bin"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := Paths{Models: models, Shared: shared}
	if got, want := p.ModelFile("in-shared.bin"), filepath.Join(shared, "models", "in-shared.bin"); got != want {
		t.Errorf("shared file: %q, want %q", got, want)
	}
	if got, want := p.ModelFile("pulled.bin"), filepath.Join(models, "pulled.bin"); got != want {
		t.Errorf("other file: %q, want %q", got, want)
	}
	p.Shared = ""
	if got, want := p.ModelFile("in-shared.bin"), filepath.Join(models, "in-shared.bin"); got != want {
		t.Errorf("without shared assets: %q, want %q", got, want)
	}
}
