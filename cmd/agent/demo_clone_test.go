package main

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modelstore"
)

// TestDemoInPlainClone: in a clone without ../shared and with PARLEY_SHARED unset, `agent
// models pull --demo --mirror URL` fetches the demo's models from a server laid out as
// their hosts are, and then the README's main job runs: its models come from the
// models folder, and its user speech is spoken from the scenario's words.
func TestDemoInPlainClone(t *testing.T) {
	root := testenv.ModuleRoot(t)
	mirror := t.TempDir()
	for _, m := range modelstore.Builtin().Demos() {
		u, err := url.Parse(m.URL)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(testenv.SharedFile(t, "models/"+m.File))
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(mirror, filepath.FromSlash(u.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(mirror)))
	defer srv.Close()

	// The clone: what the main job reads of the checkout, and no shared/ beside it.
	clone := filepath.Join(t.TempDir(), "parley")
	if err := os.CopyFS(filepath.Join(clone, "configs"), os.DirFS(filepath.Join(root, "configs"))); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "README.md"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(clone, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(clone, "..", "shared")); !os.IsNotExist(err) {
		t.Fatalf("the clone has a shared folder beside it: %v", err)
	}
	home := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "HOME" || strings.HasPrefix(name, "XDG_") || strings.HasPrefix(name, "PARLEY_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+home)
	run := func(limit time.Duration, args ...string) string {
		t.Helper()
		p := startAgentIn(t, clone, env, nil, args...)
		if code := p.wait(t, limit); code != 0 {
			t.Fatalf("agent %s: exit %d\n%s%s", strings.Join(args, " "), code, p.stdout.String(), p.stderrText())
		}
		return p.stdout.String()
	}

	// Before the pull, the main job says how to get its models.
	mainJob := readmeMainCommand(t, filepath.Join(clone, "README.md"))
	early := startAgentIn(t, clone, env, nil, mainJob...)
	if code := early.wait(t, 2*time.Minute); code != 1 || !strings.Contains(early.stderrText(), "fix: agent models pull --demo") {
		t.Errorf("the main job without its models: exit %d, want 1 and the advice to pull them:\n%s", code, early.stderrText())
	}

	out := run(2*time.Minute, "models", "pull", "--demo", "--mirror", srv.URL)
	for _, m := range modelstore.Builtin().Demos() {
		if !strings.Contains(out, m.Name+": ok (sha256 verified) "+filepath.Join(home, ".local/share/parley/models", m.File)) || !strings.Contains(out, "from "+srv.URL+"/") {
			t.Errorf("%s was not pulled into the models folder:\n%s", m.Name, out)
		}
	}

	// The demo's models are the models folder's: the clone has no shared test assets.
	models := filepath.Join(home, ".local/share/parley/models")
	out = run(time.Minute, "config", "--config", "configs/demo.yaml")
	for _, want := range []string{"  model: " + filepath.Join(models, "stories260K.gguf") + " #", "  model: " + filepath.Join(models, "ggml-silero-v6.2.0.bin") + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's config does not use the pulled model (%q):\n%s", want, out)
		}
	}

	out = run(5*time.Minute, mainJob...)
	if !strings.Contains(out, "3 of the scenario's recordings are not here") {
		t.Errorf("the replay did not say it spoke the absent recordings:\n%s", out)
	}
	wrote := regexp.MustCompile(`(?m)^wrote (\S+):`).FindStringSubmatch(out)
	if wrote == nil {
		t.Fatalf("the replay did not say where it wrote:\n%s", out)
	}
	if !strings.HasPrefix(wrote[1], filepath.Join(home, ".local/state/parley/replays")) {
		t.Errorf("the replay wrote into %s, not the logs folder", wrote[1])
	}
	transcript, err := os.ReadFile(filepath.Join(wrote[1], "transcript.txt"))
	if err != nil {
		t.Fatal(err)
	}
	turns := map[string]int{}
	interrupted := 0
	entry := regexp.MustCompile(`^\s*[0-9.]+–\s*[0-9.]+\s+(user|agent)\s`)
	for _, line := range strings.Split(strings.TrimSpace(string(transcript)), "\n") {
		m := entry.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("transcript line %q", line)
		}
		turns[m[1]]++
		if strings.Contains(line, "(interrupted") {
			interrupted++
		}
	}
	if turns["user"] != 3 || turns["agent"] != 3 || interrupted != 1 {
		t.Errorf("the transcript has %d user and %d agent turns, %d interrupted; want 3, 3 and the barge-in's 1:\n%s",
			turns["user"], turns["agent"], interrupted, transcript)
	}
	if _, err := os.Stat(filepath.Join(wrote[1], "session", "session.json")); err != nil {
		t.Errorf("no session saved: %v", err)
	}
}

// readmeMainCommand returns the arguments of the README's main job (the command after
// <!-- main-command -->), without the scripts/env that runs it where the libraries are:
// the test already runs there.
func readmeMainCommand(t *testing.T, readme string) []string {
	t.Helper()
	f, err := os.Open(readme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	marked := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "<!-- main-command -->":
			marked = true
		case marked && line != "" && !strings.HasPrefix(line, "```"):
			args := strings.Fields(line)
			if len(args) > 0 && args[0] == "scripts/env" {
				args = args[1:]
			}
			if len(args) < 2 || args[0] != "agent" {
				t.Fatalf("the README's main command %q does not run the agent", line)
			}
			return args[1:]
		}
	}
	t.Fatalf("%s has no <!-- main-command -->", readme)
	return nil
}
