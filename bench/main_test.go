package bench

import (
	"os"
	"testing"

	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/whisper"
)

func TestMain(m *testing.M) {
	// The libraries' own lines off: libwhisper logs every VAD window and libllama every
	// tensor at info level. ggml's logger comes last (the others point it at theirs).
	whisper.SetLogger(whisper.LogNone, nil)
	llama.SetLogger(llama.LogNone, nil)
	ggml.SetLogger(ggml.LogNone, nil)
	os.Exit(m.Run())
}
