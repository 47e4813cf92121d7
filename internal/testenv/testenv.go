// Package testenv finds the shared test assets and the native tools tests need, and
// enforces the project's rule: outside CI a missing asset skips a test, in CI (CI=true)
// it fails it.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// InCI reports whether the tests run in CI, where nothing may be skipped for want of a
// library, model or server.
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "0" && v != "false"
}

// Missing skips the test outside CI and fails it in CI, saying what is missing and how to
// get it.
func Missing(t testing.TB, what, fix string) {
	t.Helper()
	if InCI() {
		t.Fatalf("missing %s (CI=true, so this fails instead of skipping): %s", what, fix)
	}
	t.Skipf("missing %s: %s", what, fix)
}

// ModuleRoot returns the directory holding the project's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testenv: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// SharedDir returns the shared test-asset folder: $PARLEY_SHARED, or ../shared beside the
// project root.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("PARLEY_SHARED")
	if dir == "" {
		dir = filepath.Join(ModuleRoot(t), "..", "shared")
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		Missing(t, "the shared test assets at "+dir, "place the shared/ folder beside the project or set PARLEY_SHARED")
	}
	return dir
}

// SharedFile returns the path of a file in the shared folder (rel like "models/x.gguf").
func SharedFile(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(SharedDir(t), filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		Missing(t, "shared asset "+rel, "the shared/ folder beside the project should contain it")
	}
	return p
}

// Command returns the path of an executable, or reports it missing.
func Command(t testing.TB, name, fix string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "command "+name, fix)
	}
	return p
}

// File returns path if it exists, or reports it missing.
func File(t testing.TB, path, fix string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, path, fix)
	}
	return path
}

// EnvFix is the fix to print for native tools that the project's environment provides.
const EnvFix = "run the tests through scripts/env, which provides the Debian sid root with the native tools"
