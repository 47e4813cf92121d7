package voices

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/parley-voice/parley/audio"
)

// version changes when the way sounds are made changes, so that old cache entries are
// not reused.
const version = "2"

// CacheEnv names the environment variable that overrides the cache's folder.
const CacheEnv = "PARLEY_VOICE_CACHE"

// DefaultCacheDir is $PARLEY_VOICE_CACHE, else parley/voices in the user's cache folder
// (~/.cache/parley/voices), else "" when neither is known.
func DefaultCacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	if base, err := os.UserCacheDir(); err == nil {
		return filepath.Join(base, "parley", "voices")
	}
	return ""
}

// Cache makes sounds and keeps them as 16 kHz mono 16-bit WAV files in a folder, named by
// a hash of their recipe. Several processes may share it: a sound is written to a
// temporary file and renamed into place.
type Cache struct {
	dir string
}

// OpenCache returns the cache in dir, creating the folder.
func OpenCache(dir string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("voices: no cache folder (set " + CacheEnv + ")")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("voices: cache: %w", err)
	}
	return &Cache{dir: dir}, nil
}

// Dir is the cache's folder.
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) path(kind string, key ...string) string { return c.pathExt(kind, ".wav", key...) }

// pathExt is the file of kind and key with the extension ext.
func (c *Cache) pathExt(kind, ext string, key ...string) string {
	h := sha256.Sum256([]byte(strings.Join(append([]string{version, kind}, key...), "\x00")))
	return filepath.Join(c.dir, kind+"-"+hex.EncodeToString(h[:8])+ext)
}

// Say returns a WAV file of v speaking text, synthesising it if the cache does not hold
// it yet. The engine's program (and sox, for a shifted voice) must be on the PATH; the
// error says so when one is not.
func (c *Cache) Say(ctx context.Context, v Voice, text string) (string, error) {
	if err := v.Validate(); err != nil {
		return "", err
	}
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("voices: %s: nothing to say", v)
	}
	out := c.path("say", v.Engine, v.Name, strconv.FormatFloat(v.Pitch, 'g', -1, 64), strconv.FormatFloat(v.Rate, 'g', -1, 64), text)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	tmp, err := os.MkdirTemp(c.dir, ".say-*")
	if err != nil {
		return "", fmt.Errorf("voices: %w", err)
	}
	defer os.RemoveAll(tmp)
	raw := filepath.Join(tmp, "raw.wav")
	var cmd *exec.Cmd
	switch v.Engine {
	case "flite":
		cmd, err = command(ctx, "flite", "-voice", v.Name, "-t", text, "-o", raw)
	case "festival":
		cmd, err = command(ctx, "text2wave", "-eval", "(voice_"+v.Name+")", "-o", raw)
		if cmd != nil {
			cmd.Stdin = strings.NewReader(text)
		}
	case "espeak-ng":
		cmd, err = command(ctx, "espeak-ng", "-v", v.Name, "-w", raw, text)
	}
	if err != nil {
		return "", err
	}
	if err := run(cmd); err != nil {
		return "", fmt.Errorf("voices: %s %q: %w", v, text, err)
	}
	if v.shifted() {
		// sox without dither (-D) and repeatable (-R): the same input gives the same output.
		shifted := filepath.Join(tmp, "shifted.wav")
		args := []string{"-R", "-D", raw, "-e", "floating-point", "-b", "32", shifted}
		if v.Rate != 0 && v.Rate != 1 {
			args = append(args, "tempo", "-s", strconv.FormatFloat(v.Rate, 'f', -1, 64))
		}
		if v.Pitch != 0 {
			args = append(args, "pitch", strconv.FormatFloat(v.Pitch*100, 'f', 0, 64))
		}
		cmd, err := command(ctx, "sox", args...)
		if err != nil {
			return "", err
		}
		if err := run(cmd); err != nil {
			return "", fmt.Errorf("voices: %s %q: sox: %w", v, text, err)
		}
		raw = shifted
	}
	f, err := audio.DecodeWAVFile(raw)
	if err != nil {
		return "", fmt.Errorf("voices: %s %q: %w", v, text, err)
	}
	if f, err = audio.ToPipeline(f); err != nil {
		return "", fmt.Errorf("voices: %s %q: %w", v, text, err)
	}
	if v.Engine == "festival" && !strings.Contains(v.Name, "diphone") {
		// festival's HTS voices are quiet; bring them to the others' level.
		audio.ApplyGain(f.Samples, 0.5/max(audio.Peak(f.Samples), 1e-6))
	}
	if v.shifted() && audio.Peak(f.Samples) > 0.99 {
		audio.ApplyGain(f.Samples, 0.99/audio.Peak(f.Samples)) // a pitch shift can overshoot
	}
	return out, c.store(out, f.Samples)
}

// Make returns a WAV file of the synthesised sound s, making it if the cache does not
// hold it yet.
func (c *Cache) Make(s Sound) (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	return c.Sound(s.String(), s.Samples)
}

// Sound returns a WAV file of a synthesised sound named name (its recipe and seed, which
// key the cache), making it with mk when the cache does not hold it.
func (c *Cache) Sound(name string, mk func() []float32) (string, error) {
	out := c.path("synth", name)
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	return out, c.store(out, mk())
}

// store writes samples atomically: processes running at once may make the same sound.
func (c *Cache) store(path string, samples []float32) error {
	tmp, err := os.CreateTemp(c.dir, ".tmp-*.wav")
	if err != nil {
		return fmt.Errorf("voices: %w", err)
	}
	tmp.Close()
	f := audio.Frame{Rate: Rate, Channels: 1, Samples: samples}
	if err := audio.WriteWAVFile(tmp.Name(), f, 16); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("voices: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("voices: %w", err)
	}
	return nil
}

// storeFile writes data atomically, like store.
func (c *Cache) storeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(c.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("voices: %w", err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("voices: %w", err)
	}
	return nil
}

// bytesOf is samples as raw little-endian 32-bit floats, to feed a program.
func bytesOf(samples []float32) io.Reader {
	b := make([]byte, 4*len(samples))
	for i, v := range samples {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return bytes.NewReader(b)
}

// floatsOf reads raw little-endian 32-bit floats.
func floatsOf(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// command returns the command name with args, or an error that says how to get it.
func command(ctx context.Context, name string, args ...string) (*exec.Cmd, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("voices: %s is not installed (run through scripts/env, whose Debian sid root has it, or install the Debian package that provides it): %w", name, err)
	}
	return exec.CommandContext(ctx, p, args...), nil
}

// run runs cmd and puts what it printed into its error.
func run(cmd *exec.Cmd) error {
	msg, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(msg)))
	}
	return nil
}

// Load reads a sound made by the cache (any WAV file, converted to 16 kHz mono).
func Load(path string) ([]float32, error) {
	f, err := audio.DecodeWAVFile(path)
	if err != nil {
		return nil, fmt.Errorf("voices: %w", err)
	}
	if f, err = audio.ToPipeline(f); err != nil {
		return nil, fmt.Errorf("voices: %s: %w", path, err)
	}
	return f.Samples, nil
}

// Bounds returns where the sound in samples (at Rate) starts and ends
// (audio.SoundBounds: the synthesiser's leading and trailing silence left out).
func Bounds(samples []float32) (start, end int) { return audio.SoundBounds(samples, Rate) }
