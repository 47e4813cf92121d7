package main

import (
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/whisper"
)

// quietNativeLogs keeps libwhisper's and libllama's own log lines (one per VAD window,
// dozens per model load) off the console unless the user asked for debug logs.
func quietNativeLogs(level string) {
	if level == "debug" {
		whisper.SetLogLevel(whisper.LogWarn)
		llama.SetLogLevel(llama.LogWarn)
		ggml.SetLogLevel(ggml.LogWarn)
		return
	}
	whisper.SetLogLevel(whisper.LogError)
	llama.SetLogLevel(llama.LogError)
	// Last: both libraries above point ggml's logger at their own.
	ggml.SetLogLevel(ggml.LogError)
}
