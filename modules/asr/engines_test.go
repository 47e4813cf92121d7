package asr_test

import (
	"reflect"
	"testing"

	"github.com/parley-voice/parley/modules/asr"
)

// TestFastOwnFinalsOptions: the streaming pass leaves out fwdflat and bestpath only when
// some finals are its own and FastOwnFinals asks for it; the config's own options win;
// the final pass then runs on a decoder of its own. Every pass caps its HMMs per frame.
func TestFastOwnFinalsOptions(t *testing.T) {
	capped := map[string]any{"maxhmmpf": 10000}
	fast := asr.DefaultPocketsphinxConfig()
	if got := fast.StreamingOptions(); !reflect.DeepEqual(got, map[string]any{"fwdflat": false, "bestpath": false, "maxhmmpf": 10000}) {
		t.Errorf("default streaming options %v", got)
	}
	if !fast.FinalPassApart() {
		t.Error("with fast own finals the final pass needs a decoder of its own")
	}

	if got := fast.DecoderOptions(); !reflect.DeepEqual(got, capped) {
		t.Errorf("default final pass options %v", got)
	}

	fast.Options = map[string]any{"bestpath": true, "beam": 1e-40, "maxhmmpf": 2000}
	if got := fast.StreamingOptions(); !reflect.DeepEqual(got, map[string]any{"fwdflat": false, "bestpath": true, "beam": 1e-40, "maxhmmpf": 2000}) {
		t.Errorf("options from the config %v", got)
	}

	uncapped := asr.DefaultPocketsphinxConfig()
	uncapped.MaxHMMsPerFrame = 0
	if got := uncapped.DecoderOptions(); len(got) != 0 {
		t.Errorf("max_hmms_per_frame 0: pocketsphinx's own default, options %v", got)
	}

	everyTurn := asr.DefaultPocketsphinxConfig()
	everyTurn.AdaptAfter = 0 // the final pass for every utterance: no own finals
	if got := everyTurn.StreamingOptions(); !reflect.DeepEqual(got, capped) || everyTurn.FinalPassApart() {
		t.Errorf("final pass every turn: streaming options %v, apart %v", got, everyTurn.FinalPassApart())
	}

	full := asr.DefaultPocketsphinxConfig()
	full.FastOwnFinals = false
	if got := full.StreamingOptions(); !reflect.DeepEqual(got, capped) || full.FinalPassApart() {
		t.Errorf("without fast own finals: streaming options %v, apart %v", got, full.FinalPassApart())
	}

	noFinalPass := asr.DefaultPocketsphinxConfig()
	noFinalPass.FinalPass = false
	if got := noFinalPass.StreamingOptions(); got["fwdflat"] != false || noFinalPass.FinalPassApart() {
		t.Errorf("without the final pass: streaming options %v, apart %v", got, noFinalPass.FinalPassApart())
	}
}
