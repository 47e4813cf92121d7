package bargeintest

import (
	"testing"

	"github.com/parley-voice/parley/pipeline/internal/overlaptable"
)

// TestSoundsOverTheAgent replays the barge-ins of the table over the agent's answer:
// each must stop it in time, its history cut to the words heard (overlaptable). It runs
// before TestHesitantBargeIns, so that its first replay is the process's first.
func TestSoundsOverTheAgent(t *testing.T) {
	overlaptable.Sounds(t, overlaptable.BargeIns)
}

// TestHesitantBargeIns replays barge-ins in phrases, with pauses between them
// (overlaptable.HesitantBargeIns).
func TestHesitantBargeIns(t *testing.T) {
	overlaptable.HesitantBargeIns(t)
}
