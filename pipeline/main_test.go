package pipeline

import (
	"os"
	"testing"

	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/whisper"
)

func TestMain(m *testing.M) {
	// libwhisper logs every VAD window and libllama every tensor at info level.
	whisper.SetLogger(whisper.LogNone, nil)
	llama.SetLogger(llama.LogNone, nil)
	os.Exit(m.Run())
}
