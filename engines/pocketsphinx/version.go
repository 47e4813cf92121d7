// Package pocketsphinx is Parley's thin cgo layer over libpocketsphinx (5.x): decoding
// with partial hypotheses and word segmentation, with a Go-shaped API and a Close for
// every C resource.
package pocketsphinx

/*
#cgo pkg-config: pocketsphinx
#include <pocketsphinx.h>
*/
import "C"

// DefaultModelDir returns the model directory compiled into libpocketsphinx (Debian's
// pocketsphinx-en-us installs the US English model below it).
func DefaultModelDir() string { return C.GoString(C.ps_default_modeldir()) }
