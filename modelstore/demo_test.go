package modelstore

import (
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

// TestDemoModelsAreTheSharedAssets: the demo's downloadable models are byte for byte the
// shared test assets that CI runs the demo on (size and sha256), so that a clone without
// ../shared replays the demo with the same models.
func TestDemoModelsAreTheSharedAssets(t *testing.T) {
	demos := Builtin().Demos()
	kinds := map[Kind]bool{}
	for _, m := range demos {
		kinds[m.Kind] = true
		if err := Verify(testenv.SharedFile(t, "models/"+m.File), m); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
	if !kinds[KindLLM] || !kinds[KindVAD] {
		t.Errorf("the demo needs an LLM and a VAD model; its models are %+v", demos)
	}
}
