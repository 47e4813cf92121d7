package hesitanttest

import (
	"testing"

	"github.com/parley-voice/parley/pipeline/internal/overlaptable"
)

// TestHesitantBargeIns replays barge-ins in phrases, with pauses between them
// (overlaptable.HesitantBargeIns).
func TestHesitantBargeIns(t *testing.T) {
	overlaptable.HesitantBargeIns(t)
}
