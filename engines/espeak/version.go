// Package espeak is Parley's thin cgo layer over libespeak-ng: synthesis to PCM with word
// events, with a Go-shaped API and a Close for every C resource.
package espeak

/*
#cgo pkg-config: espeak-ng
#include <espeak-ng/speak_lib.h>
*/
import "C"

// Version returns the linked libespeak-ng's version and its data directory.
func Version() (version, dataPath string) {
	var path *C.char
	v := C.espeak_Info(&path)
	return C.GoString(v), C.GoString(path)
}
