// Package voices makes test sounds at test time: speech in voices that the rest of the
// tests do not use (Debian's flite, festival and espeak-ng variants), and synthesised
// hums, coughs, knocks and noise bursts (synth.go). Nothing it makes is committed: the
// sounds are cached in a directory keyed by engine, voice and text, so that a second run
// does not synthesise again.
package voices

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
)

// Voice is a text-to-speech voice of one of the engines Debian ships.
type Voice struct {
	// Engine is "flite", "festival" or "espeak-ng".
	Engine string
	// Name is the engine's voice: flite's kal, slt, rms, awb; festival's kal_diphone or
	// cmu_us_slt_arctic_hts; an espeak-ng voice with variant ("en-us+f3").
	Name string
}

func (v Voice) String() string { return v.Engine + ":" + v.Name }

// The voices the barge-in tests speak with. None of them is the agent's (espeak-ng
// en-us) or another test's.
var (
	FliteSLT    = Voice{"flite", "slt"}
	FliteRMS    = Voice{"flite", "rms"}
	FliteAWB    = Voice{"flite", "awb"}
	FliteKAL    = Voice{"flite", "kal"}
	FestivalKAL = Voice{"festival", "kal_diphone"}
	FestivalSLT = Voice{"festival", "cmu_us_slt_arctic_hts"}
	EspeakF3    = Voice{"espeak-ng", "en-us+f3"}
	EspeakScot  = Voice{"espeak-ng", "en-gb-scotland"}
)

// version changes when the way sounds are made changes, so that old cache entries are
// not reused.
const version = "1"

// Cache makes and keeps test sounds.
type Cache struct {
	dir string
}

// NewCache returns the cache in $PARLEY_VOICE_CACHE, else in the user's cache directory
// (parley-test-voices), else in a temporary directory of the test.
func NewCache(t testing.TB) *Cache {
	t.Helper()
	dir := os.Getenv("PARLEY_VOICE_CACHE")
	if dir == "" {
		if base, err := os.UserCacheDir(); err == nil {
			dir = filepath.Join(base, "parley-test-voices")
		}
	}
	if dir == "" || os.MkdirAll(dir, 0o755) != nil {
		dir = t.TempDir()
	}
	return &Cache{dir: dir}
}

func (c *Cache) path(kind string, key ...string) string {
	h := sha256.Sum256([]byte(strings.Join(append([]string{version, kind}, key...), "\x00")))
	return filepath.Join(c.dir, kind+"-"+hex.EncodeToString(h[:8])+".wav")
}

// Say returns a 16 kHz mono WAV file of v speaking text, synthesising it if the cache
// does not hold it yet. A missing engine skips the test (fails it in CI).
func (c *Cache) Say(t testing.TB, v Voice, text string) string {
	t.Helper()
	out := c.path("say", v.Engine, v.Name, text)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	raw := filepath.Join(t.TempDir(), "raw.wav")
	var cmd *exec.Cmd
	switch v.Engine {
	case "flite":
		cmd = exec.Command(testenv.Command(t, "flite", testenv.EnvFix), "-voice", v.Name, "-t", text, "-o", raw)
	case "festival":
		cmd = exec.Command(testenv.Command(t, "text2wave", testenv.EnvFix), "-eval", "(voice_"+v.Name+")", "-o", raw)
		cmd.Stdin = strings.NewReader(text)
	case "espeak-ng":
		cmd = exec.Command(testenv.Command(t, "espeak-ng", testenv.EnvFix), "-v", v.Name, "-w", raw, text)
	default:
		t.Fatalf("voices: unknown engine %q", v.Engine)
	}
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("voices: %s %q: %v\n%s", v, text, err, msg)
	}
	f, err := audio.DecodeWAVFile(raw)
	if err != nil {
		t.Fatalf("voices: %s %q: %v", v, text, err)
	}
	if f, err = audio.ToPipeline(f); err != nil {
		t.Fatalf("voices: %s %q: %v", v, text, err)
	}
	if v.Engine == "festival" && !strings.Contains(v.Name, "diphone") {
		// festival's HTS voices are quiet; bring them to the others' level.
		audio.ApplyGain(f.Samples, 0.5/max(audio.Peak(f.Samples), 1e-6))
	}
	c.store(t, out, f.Samples)
	return out
}

// Sound returns a WAV file of a synthesised sound named name (its recipe and seed,
// which key the cache), making it with mk when the cache does not hold it.
func (c *Cache) Sound(t testing.TB, name string, mk func() []float32) string {
	t.Helper()
	out := c.path("synth", name)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	c.store(t, out, mk())
	return out
}

// store writes samples atomically (tests running in parallel may make the same sound).
func (c *Cache) store(t testing.TB, path string, samples []float32) {
	t.Helper()
	tmp, err := os.CreateTemp(c.dir, ".tmp-*.wav")
	if err != nil {
		t.Fatalf("voices: %v", err)
	}
	tmp.Close()
	f := audio.Frame{Rate: Rate, Channels: 1, Samples: samples}
	if err := audio.WriteWAVFile(tmp.Name(), f, 16); err != nil {
		os.Remove(tmp.Name())
		t.Fatalf("voices: %v", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		t.Fatalf("voices: %v", err)
	}
}

// Load reads a sound made by the cache.
func Load(t testing.TB, path string) []float32 {
	t.Helper()
	f, err := audio.DecodeWAVFile(path)
	if err != nil {
		t.Fatalf("voices: %v", err)
	}
	if f.Rate != Rate || f.Channels != 1 {
		t.Fatalf("voices: %s is %d Hz x%d", path, f.Rate, f.Channels)
	}
	return f.Samples
}

// Bounds returns where the sound in samples starts and ends: the first and last 10 ms
// frame whose level is within 35 dB of the loudest frame (leading and trailing silence
// of a synthesiser left out).
func Bounds(samples []float32) (start, end int) {
	const frame = Rate / 100
	var levels []float64
	peak := 0.0
	for i := 0; i+frame <= len(samples); i += frame {
		r := audio.RMS(samples[i : i+frame])
		levels = append(levels, r)
		peak = max(peak, r)
	}
	if peak == 0 {
		return 0, 0
	}
	th := peak * 0.0178 // -35 dB
	first, last := -1, -1
	for i, l := range levels {
		if l >= th {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	return first * frame, (last + 1) * frame
}

// Describe names a sound for logs: "flite:slt \"yeah\"".
func Describe(v Voice, text string) string { return fmt.Sprintf("%s %q", v, text) }
