package main

import (
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/whisper"
	"go.uber.org/zap"
)

// nativeLogs are the native libraries whose own log lines go to the agent's log, each
// under its logger name, in the order their loggers must be set: libwhisper and libllama
// point ggml's logger at their own, so ggml comes last.
func nativeLogs() []struct {
	name string
	set  func(ggml.LogLevel, ggml.LogFunc)
} {
	return []struct {
		name string
		set  func(ggml.LogLevel, ggml.LogFunc)
	}{{"whisper", whisper.SetLogger}, {"llama", llama.SetLogger}, {"ggml", ggml.SetLogger}}
}

// nativeLogNames lists the loggers of nativeLogs (for --log-modules).
func nativeLogNames() []string {
	var names []string
	for _, n := range nativeLogs() {
		names = append(names, n.name)
	}
	return names
}

// routeNativeLogs sends libwhisper's, libllama's and ggml's own log lines to log at debug
// level (their severity in a field), under the loggers "whisper", "llama" and "ggml":
// on the console they would break the conversation's lines, and most of them (a model's
// tensors, an aborted decode's "failed to decode", which every dropped prepared reply
// causes) are of no interest to a user. A library whose logger is not at debug level
// gets nothing through: its lines are dropped in C. Lines below info level are never
// forwarded (llama.cpp's debug lines come per decode). The returned function detaches
// the libraries from log (which its owner is about to close).
func routeNativeLogs(log *zap.Logger) (detach func()) {
	for _, n := range nativeLogs() {
		l := log.Named(n.name).WithOptions(zap.WithCaller(false))
		if l.Check(zap.DebugLevel, "") == nil {
			n.set(ggml.LogNone, nil)
			continue
		}
		n.set(ggml.LogInfo, func(level ggml.LogLevel, line string) {
			l.Debug(line, zap.Stringer("native_level", level))
		})
	}
	return func() {
		for _, n := range nativeLogs() {
			n.set(ggml.LogNone, nil)
		}
	}
}
