package chat

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/userdirs"
)

func TestMain(m *testing.M) {
	// libwhisper logs every VAD window and libllama every tensor at info level.
	whisper.SetLogger(whisper.LogNone, nil)
	llama.SetLogger(llama.LogNone, nil)
	os.Exit(m.Run())
}

// demoConfig is the demo agent's configuration (configs/demo.yaml) on the shared test
// assets, with its models and sessions in temporary directories.
func demoConfig(t testing.TB) pipeline.Config {
	t.Helper()
	shared := testenv.SharedDir(t)
	t.Setenv("PARLEY_SHARED", shared)
	testenv.File(t, filepath.Join(shared, "models", "stories260K.gguf"), "the shared test assets")
	cfg, err := pipeline.Load(filepath.Join(testenv.ModuleRoot(t), "configs", "demo.yaml"), pipeline.Default(userdirs.Paths{Models: t.TempDir(), Sessions: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
