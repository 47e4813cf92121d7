package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/modelstore"
)

// TestModelsPullOffline: without a network every default model is tried, the summary
// names those that failed, and the user is told the machine is offline and how to use
// a mirror.
func TestModelsPullOffline(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	code, stdout, stderr := runAgentBinary(t, userEnv(t, t.TempDir()), 2*time.Minute,
		"models", "pull", "--dir", dir, "--mirror", "https://parley-offline.invalid")
	var defaults []string
	for _, m := range modelstore.Builtin() {
		if m.Default {
			defaults = append(defaults, m.Name)
		}
	}
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, name := range defaults {
		if !strings.Contains(stdout, name+": FAILED") {
			t.Errorf("%s was not tried:\n%s", name, stdout)
		}
	}
	for _, want := range []string{"seems to be offline", "--mirror", "PARLEY_MODEL_MIRROR", "agent models verify"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the advice lacks %q:\n%s", want, stdout)
		}
	}
	if want := "agent models: " + itoaTest(len(defaults)) + " of " + itoaTest(len(defaults)) + " model(s) not pulled: " + strings.Join(defaults, ", "); !strings.Contains(stderr, want) {
		t.Errorf("the summary is not %q:\n%s", want, stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("an offline pull left %v", left)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("an offline pull took %v: it retried", d)
	}
}

func itoaTest(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestModelsPullTriesEveryModel: over https (a local server the agent trusts through
// SSL_CERT_FILE), a model with a wrong checksum and one whose host is unknown fail, and
// the good one between them is still pulled; the failed ones leave no .part behind.
func TestModelsPullTriesEveryModel(t *testing.T) {
	data := []byte(strings.Repeat("parley model bytes ", 5000))
	sum := sha256.Sum256(data)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/good.bin", "/corrupt.bin":
			w.Write(data)
		case "/to-http.bin":
			http.Redirect(w, r, "http://"+r.Host+"/good.bin", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	tmp := t.TempDir()
	certFile := filepath.Join(tmp, "cert.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	hex := hex.EncodeToString(sum[:])
	catalog := modelstore.Catalog{
		{Name: "corrupt", Kind: modelstore.KindLLM, File: "corrupt.bin", URL: srv.URL + "/corrupt.bin", Size: int64(len(data)), SHA256: strings.Repeat("0", 64)},
		{Name: "good", Kind: modelstore.KindLLM, File: "good.bin", URL: srv.URL + "/good.bin", Size: int64(len(data)), SHA256: hex},
		{Name: "downgraded", Kind: modelstore.KindLLM, File: "downgraded.bin", URL: srv.URL + "/to-http.bin", Size: int64(len(data)), SHA256: hex},
		{Name: "elsewhere", Kind: modelstore.KindLLM, File: "elsewhere.bin", URL: "https://parley-offline.invalid/elsewhere.bin", Size: int64(len(data)), SHA256: hex},
	}
	catalogFile := filepath.Join(tmp, "catalog.json")
	b, _ := json.Marshal(catalog)
	if err := os.WriteFile(catalogFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "models")
	env := userEnv(t, t.TempDir(), "SSL_CERT_FILE="+certFile)
	code, stdout, stderr := runAgentBinary(t, env, 2*time.Minute, "models", "pull", "--catalog", catalogFile, "--dir", dir, "--retries", "1",
		"corrupt", "good", "downgraded", "elsewhere")
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"corrupt: FAILED: modelstore: corrupt: checksum mismatch", "good: ok (sha256 verified)",
		"downgraded: FAILED: modelstore: fetching downgraded: ", "which is not https", "elsewhere: FAILED", "seems to be offline"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "3 of 4 model(s) not pulled: corrupt, downgraded, elsewhere") {
		t.Errorf("summary:\n%s", stderr)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 1 || filepath.Base(left[0]) != "good.bin" {
		t.Errorf("the models folder holds %v, want only good.bin", left)
	}
}
