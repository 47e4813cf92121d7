package evalrun

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/whisper"
)

// jobEnv names the job file a helper process runs (the test binary stands in for
// 'agent eval --job').
const jobEnv = "PARLEY_EVAL_TEST_JOB"

func TestMain(m *testing.M) {
	// libwhisper logs every VAD window and libllama every tensor at info level.
	whisper.SetLogger(whisper.LogNone, nil)
	llama.SetLogger(llama.LogNone, nil)
	if job := os.Getenv(jobEnv); job != "" {
		if err := RunJob(context.Background(), job); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
