package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/parley-voice/parley/engines/espeak"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/portaudio"
	"github.com/parley-voice/parley/engines/pulse"
	"github.com/parley-voice/parley/engines/whisper"
)

// version is the release this binary was built as, set at link time:
//
//	go build -ldflags "-X main.version=v0.3.0" ./cmd/agent
//
// Without it, agentVersion reads the module version and the commit from the build info.
var version string

// agentVersion returns the agent's version: the one set at link time, else the main
// module's version with the commit it was built from (and "modified" when the checkout
// had uncommitted changes).
func agentVersion() string {
	v := version
	info, ok := debug.ReadBuildInfo()
	if v == "" && ok {
		v = info.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	if !ok {
		return v
	}
	var rev, when string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += ", commit " + rev
		if when != "" {
			v += " of " + when
		}
		if modified {
			v += ", modified"
		}
	}
	return v
}

// writeVersion prints the agent's version and those of the native libraries it links.
func writeVersion(w io.Writer) {
	fmt.Fprintf(w, "agent %s (%s, %s/%s)\n", agentVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	espeakVersion, _ := espeak.Version()
	libs := [][2]string{
		{"libllama", "build " + llama.Version()},
		{"ggml", ggml.Version()},
		{"libwhisper", whisper.Version()},
		{"portaudio", portaudio.Version()},
		{"espeak-ng", espeakVersion},
	}
	if v := pulse.LibraryVersion(); v != "" {
		libs = append(libs, [2]string{"libpulse", v})
	}
	for _, l := range libs {
		fmt.Fprintf(tw, "  %s\t%s\n", l[0], l[1])
	}
	tw.Flush()
}
