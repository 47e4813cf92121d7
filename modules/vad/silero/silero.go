// Package silero is the VAD module's speech scorer: Silero VAD run by libwhisper
// (engines/whisper). Package vad stays pure Go; pipeline opens the scorer with Open and
// hands it to vad.New.
package silero

import (
	"errors"
	"fmt"

	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/modules/vad"
)

// Open loads the Silero model cfg.Model (in whisper.cpp's ggml format) with cfg.Threads.
// The scorer satisfies vad.Scorer; Close it after the network that uses it ran.
func Open(cfg vad.Config) (*whisper.VAD, error) {
	if cfg.Model == "" {
		return nil, errors.New("vad: no model configured")
	}
	if err := ggml.LoadBackends(); err != nil {
		return nil, fmt.Errorf("vad: %w", err)
	}
	v, err := whisper.NewVAD(cfg.Model, whisper.VADParams{Threads: cfg.Threads})
	if err != nil {
		return nil, fmt.Errorf("vad: %w", err)
	}
	return v, nil
}

var _ vad.Scorer = (*whisper.VAD)(nil)
