// Package llama is Parley's own thin cgo binding to llama.h (libllama from llama.cpp):
// models, contexts, tokenizer, batch decoding, samplers and KV-cache operations, with a
// Go-shaped API and a Close for every C resource.
package llama

/*
#cgo pkg-config: llama
#include <llama.h>
*/
import "C"

// Version returns the linked libllama's version string.
func Version() string { return C.GoString(C.llama_version()) }

// SystemInfo returns libllama's description of the CPU features it uses.
func SystemInfo() string { return C.GoString(C.llama_print_system_info()) }
