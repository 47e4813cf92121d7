package espeak

/*
#include <stdint.h>
#include <espeak-ng/speak_lib.h>
*/
import "C"

import "runtime/cgo"

// parleyEspeakPiece is espeak's synthesis callback (through parley_synth_callback in
// espeak.go). It runs on the owner goroutine, inside espeak_ng_Synthesize. A file that
// exports to C may only declare things in its preamble, hence this separate file.
//
//export parleyEspeakPiece
func parleyEspeakPiece(handle C.uintptr_t, wav *C.short, n C.int, events *C.espeak_EVENT) C.int {
	j, ok := cgo.Handle(handle).Value().(*job)
	if !ok {
		return 1 // not one of ours: stop rather than guess
	}
	return j.piece(wav, n, events)
}
