package bargeintest

import (
	"testing"

	"github.com/parley-voice/parley/pipeline/internal/overlaptable"
)

// TestSoundsOverTheAgent replays the barge-ins of the table over the agent's answer:
// each must stop it in time, its history cut to the words heard (overlaptable).
func TestSoundsOverTheAgent(t *testing.T) {
	overlaptable.Sounds(t, overlaptable.BargeIns)
}
