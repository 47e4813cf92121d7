package overlaptest

import (
	"testing"

	"github.com/parley-voice/parley/pipeline/internal/overlaptable"
)

// TestSoundsOverTheAgent replays the backchannels and noises of the table over the
// agent's answer: none may stop it, become a user turn, or silence it (overlaptable).
func TestSoundsOverTheAgent(t *testing.T) {
	overlaptable.Sounds(t, overlaptable.Backchannels)
}
