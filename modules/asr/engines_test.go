package asr_test

import (
	"reflect"
	"testing"

	"github.com/parley-voice/parley/modules/asr"
)

// TestFastOwnFinalsOptions: the streaming pass leaves out fwdflat and bestpath only when
// some finals are its own and FastOwnFinals asks for it; the config's own options win;
// the final pass then runs on a decoder of its own.
func TestFastOwnFinalsOptions(t *testing.T) {
	fast := asr.DefaultPocketsphinxConfig()
	if got := fast.StreamingOptions(); !reflect.DeepEqual(got, map[string]any{"fwdflat": false, "bestpath": false}) {
		t.Errorf("default streaming options %v", got)
	}
	if !fast.FinalPassApart() {
		t.Error("with fast own finals the final pass needs a decoder of its own")
	}

	fast.Options = map[string]any{"bestpath": true, "beam": 1e-40}
	if got := fast.StreamingOptions(); !reflect.DeepEqual(got, map[string]any{"fwdflat": false, "bestpath": true, "beam": 1e-40}) {
		t.Errorf("options from the config %v", got)
	}

	everyTurn := asr.DefaultPocketsphinxConfig()
	everyTurn.AdaptAfter = 0 // the final pass for every utterance: no own finals
	if got := everyTurn.StreamingOptions(); got != nil || everyTurn.FinalPassApart() {
		t.Errorf("final pass every turn: streaming options %v, apart %v", got, everyTurn.FinalPassApart())
	}

	full := asr.DefaultPocketsphinxConfig()
	full.FastOwnFinals = false
	if got := full.StreamingOptions(); got != nil || full.FinalPassApart() {
		t.Errorf("without fast own finals: streaming options %v, apart %v", got, full.FinalPassApart())
	}

	noFinalPass := asr.DefaultPocketsphinxConfig()
	noFinalPass.FinalPass = false
	if got := noFinalPass.StreamingOptions(); got["fwdflat"] != false || noFinalPass.FinalPassApart() {
		t.Errorf("without the final pass: streaming options %v, apart %v", got, noFinalPass.FinalPassApart())
	}
}
