package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/parley-voice/parley/engines/espeak"
	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/tts"
)

func TestOpenASR(t *testing.T) {
	hmm, _, _ := pocketsphinx.DefaultModel()
	if _, err := os.Stat(filepath.Join(hmm, "mdef")); err != nil {
		testenv.Missing(t, "the pocketsphinx en-us model", "install pocketsphinx-en-us; "+testenv.EnvFix)
	}
	cfg := asr.DefaultConfig()
	_, closeASR, err := openASR("asr", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := closeASR(); err != nil {
		t.Fatal(err)
	}
	cfg.Engine = "whisper"
	cfg.Whisper.Model = testenv.SharedFile(t, "models/ggml-tiny.en-for-tests.bin")
	cfg.Whisper.Threads = 2
	_, closeASR, err = openASR("asr", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeASR()
	cfg.Whisper.Model = ""
	if _, _, err := openASR("asr", cfg, nil); err == nil {
		t.Fatal("whisper without a model opened")
	}
	cfg.Whisper.Model = filepath.Join(t.TempDir(), "missing.bin")
	if _, _, err := openASR("asr", cfg, nil); err == nil {
		t.Fatal("whisper with a missing model opened")
	}
	cfg.Engine = "kaldi"
	if _, _, err := openASR("asr", cfg, nil); err == nil {
		t.Error("unknown engine accepted")
	}
}

func TestOpenTTS(t *testing.T) {
	m, closeTTS, err := openTTS("", tts.DefaultConfig(), nil)
	if err != nil {
		if _, data := espeak.Version(); data == "" {
			testenv.Missing(t, "espeak-ng data", testenv.EnvFix)
		}
		t.Fatal(err)
	}
	if m.Name() != "tts" {
		t.Errorf("name %q", m.Name())
	}
	if err := closeTTS(); err != nil {
		t.Fatal(err)
	}
	bad := tts.DefaultConfig()
	bad.Voice = "xyzzy"
	if _, _, err := openTTS("tts", bad, nil); !errors.Is(err, espeak.ErrVoiceNotFound) {
		t.Fatalf("unknown voice: %v", err)
	}
}
