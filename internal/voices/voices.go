// Package voices is audio/voices for tests: its cache and speech with a testing.TB, so
// that a missing engine skips the test (fails it in CI, internal/testenv) and any other
// error fails it. The sounds themselves, and what they are, are audio/voices'.
package voices

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"

	"github.com/parley-voice/parley/audio/voices"
	"github.com/parley-voice/parley/internal/testenv"
)

// Rate is the sample rate of every sound (16 kHz).
const Rate = voices.Rate

// Voice is a text-to-speech voice of one of the engines Debian ships: Engine is
// "flite", "festival" or "espeak-ng", Name the engine's voice.
type Voice struct {
	Engine string
	Name   string
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

// The synthesised sounds (audio/voices).
type HumShape = voices.HumShape

const (
	MmHmm = voices.MmHmm
	Hmm   = voices.Hmm
	Mhm   = voices.Mhm
)

var (
	Hum   = voices.Hum
	Cough = voices.Cough
	Knock = voices.Knock
	Noise = voices.Noise
	// Bounds returns where the sound in samples starts and ends.
	Bounds = voices.Bounds
)

// Cache makes and keeps test sounds.
type Cache struct {
	c *voices.Cache
}

// NewCache returns the cache in voices.DefaultCacheDir ($PARLEY_VOICE_CACHE, else the
// user's cache folder), else in a temporary directory of the test.
func NewCache(t testing.TB) *Cache {
	t.Helper()
	c, err := voices.OpenCache(voices.DefaultCacheDir())
	if err != nil {
		if c, err = voices.OpenCache(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	return &Cache{c: c}
}

// Say returns a 16 kHz mono WAV file of v speaking text, synthesising it if the cache
// does not hold it yet. A missing engine skips the test (fails it in CI).
func (c *Cache) Say(t testing.TB, v Voice, text string) string {
	t.Helper()
	program := map[string]string{"flite": "flite", "festival": "text2wave", "espeak-ng": "espeak-ng"}[v.Engine]
	if program != "" {
		testenv.Command(t, program, testenv.EnvFix)
	}
	path, err := c.c.Say(context.Background(), voices.Voice{Engine: v.Engine, Name: v.Name}, text)
	if errors.Is(err, exec.ErrNotFound) {
		testenv.Missing(t, fmt.Sprint(err), testenv.EnvFix)
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Sound returns a WAV file of a synthesised sound named name (its recipe and seed,
// which key the cache), making it with mk when the cache does not hold it.
func (c *Cache) Sound(t testing.TB, name string, mk func() []float32) string {
	t.Helper()
	path, err := c.c.Sound(name, mk)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Load reads a sound made by the cache.
func Load(t testing.TB, path string) []float32 {
	t.Helper()
	s, err := voices.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Describe names a sound for logs: "flite:slt \"yeah\"".
func Describe(v Voice, text string) string { return fmt.Sprintf("%s %q", v, text) }
