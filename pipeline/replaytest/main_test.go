package replaytest

import (
	"os"
	"testing"

	"github.com/parley-voice/parley/pipeline/internal/pipetest"
)

func TestMain(m *testing.M) {
	pipetest.QuietNativeLogs()
	os.Exit(m.Run())
}
