package modelstore

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPullOverHTTPS: downloads from https servers follow their redirects while they
// stay on https and are few; a redirect to plain http and a redirect loop are refused at
// once (no retries), and leave neither the model nor a .part behind. A .part that fails
// its checksum is removed too.
func TestPullOverHTTPS(t *testing.T) {
	data := randomData(50_000)
	files := &fileServer{data: data}
	plain := httptest.NewServer(files)
	defer plain.Close()
	var loopHits int
	mux := http.NewServeMux()
	mux.Handle("/models/test.bin", files)
	mux.HandleFunc("/cdn/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/models/test.bin", http.StatusFound)
	})
	mux.HandleFunc("/to-http/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/models/test.bin", http.StatusFound)
	})
	mux.HandleFunc("/loop/", func(w http.ResponseWriter, r *http.Request) {
		loopHits++
		http.Redirect(w, r, r.URL.Path+"x", http.StatusFound)
	})
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()

	for _, tt := range []struct {
		name    string
		path    string
		sum     string
		wantErr error
		says    string
	}{
		{name: "https", path: "/models/test.bin"},
		{name: "redirect on https", path: "/cdn/test.bin"},
		{name: "redirect to http", path: "/to-http/test.bin", wantErr: ErrRedirect, says: "which is not https"},
		{name: "redirect loop", path: "/loop/", wantErr: ErrRedirect, says: "more than 5 redirects"},
		{name: "wrong checksum", path: "/models/test.bin", sum: strings.Repeat("0", 64), wantErr: ErrChecksum, says: "sha256"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			loopHits = 0
			m := testModel(t, srv.URL, data)
			m.URL = srv.URL + tt.path
			if tt.sum != "" {
				m.SHA256 = tt.sum
			}
			dir := t.TempDir()
			d := &Downloader{Dir: dir, Client: srv.Client(), Retries: 3, RetryWait: time.Millisecond}
			_, err := d.Pull(context.Background(), m, nil)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("err = %v, want %v saying %q", err, tt.wantErr, tt.says)
			}
			if loopHits > MaxRedirects+1 {
				t.Errorf("the loop was followed %d times: a refused redirect was retried", loopHits)
			}
			left, _ := filepath.Glob(filepath.Join(dir, "*"))
			if len(left) != 0 {
				t.Errorf("a failed pull left %v", left)
			}
		})
	}
}

// TestPullOffline: a host whose name does not resolve is reported as offline, at once.
func TestPullOffline(t *testing.T) {
	m := Model{Name: "test", File: "test.bin", URL: "https://parley-no-such-host.invalid/test.bin", Size: 10}
	d := &Downloader{Dir: t.TempDir(), Retries: 5, RetryWait: time.Second}
	start := time.Now()
	_, err := d.Pull(context.Background(), m, nil)
	if !errors.Is(err, ErrOffline) {
		t.Fatalf("err = %v, want ErrOffline", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("an offline pull was retried (%v)", time.Since(start))
	}
	if _, err := os.Stat(filepath.Join(d.Dir, "test.bin.part")); !os.IsNotExist(err) {
		t.Errorf("an empty .part is left: %v", err)
	}
}
