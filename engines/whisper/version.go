// Package whisper is Parley's thin cgo layer over libwhisper (whisper.cpp): Silero voice
// activity detection and speech recognition, with a Go-shaped API and a Close for every
// C resource.
package whisper

/*
#cgo pkg-config: whisper
#include <whisper.h>
*/
import "C"

// Version returns the linked libwhisper's version.
func Version() string { return C.GoString(C.whisper_version()) }

// SystemInfo returns libwhisper's description of the CPU features it uses.
func SystemInfo() string { return C.GoString(C.whisper_print_system_info()) }
