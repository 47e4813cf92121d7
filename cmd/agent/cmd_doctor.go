package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/gordonklaus/portaudio"
	"github.com/parley-voice/parley/engines/espeak"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/engines/whisper"
)

func doctorCommand() command {
	return command{
		Name:    "doctor",
		Summary: "check native libraries, models and audio devices, and say how to fix what is missing",
		Run:     runDoctor,
	}
}

// check is one line of the doctor's report. A failed check that is only a warning
// (warn) does not make the doctor fail: a machine without sound devices can still replay.
type check struct {
	ok     bool
	warn   bool
	name   string
	detail string
	fix    string
}

func runDoctor(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "doctor", "")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	var failed int
	section := func(title string, checks []check) {
		fmt.Fprintln(a.stdout, title)
		tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
		for _, c := range checks {
			mark := "ok"
			switch {
			case !c.ok && c.warn:
				mark = "WARN"
			case !c.ok:
				mark = "MISSING"
				failed++
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", mark, c.name, c.detail)
			if !c.ok && c.fix != "" {
				fmt.Fprintf(tw, "  \t\tfix: %s\n", c.fix)
			}
		}
		tw.Flush()
		fmt.Fprintln(a.stdout)
	}
	section("native libraries", libraryChecks())
	section("models", modelChecks(a))
	audio, devices := audioChecks()
	section("audio", audio)
	printDevices(a.stdout, devices)
	if failed > 0 {
		return fmt.Errorf("%d check(s) failed; see the fixes above", failed)
	}
	fmt.Fprintln(a.stdout, "everything Parley needs is in place")
	return nil
}

func libraryChecks() []check {
	var checks []check
	backendErr := ggml.LoadBackends()
	var devs []string
	for _, d := range ggml.Devices() {
		devs = append(devs, d.Name)
	}
	ggmlCheck := check{ok: backendErr == nil, name: "ggml", detail: ggml.Version() + "; devices: " + strings.Join(devs, ", ")}
	if backendErr != nil {
		ggmlCheck.detail = ggml.Version() + ": " + backendErr.Error()
		ggmlCheck.fix = "install ggml's CPU backend (Debian: apt install libggml0; Homebrew: brew install ggml)"
	}
	checks = append(checks,
		check{ok: true, name: "libwhisper", detail: whisper.Version()},
		check{ok: true, name: "libllama", detail: "build " + llama.Version()},
		ggmlCheck,
		check{ok: true, name: "portaudio", detail: portaudio.VersionText()},
	)
	ev, data := espeak.Version()
	checks = append(checks, check{ok: true, name: "espeak-ng", detail: ev + " (data " + data + ")"})

	ps := check{ok: true, name: "pocketsphinx", detail: pkgConfigVersion("pocketsphinx")}
	modelDir := filepath.Join(pocketsphinx.DefaultModelDir(), "en-us")
	if _, err := os.Stat(filepath.Join(modelDir, "en-us")); err != nil {
		ps.ok = false
		ps.detail += "; US English model not found in " + modelDir
		ps.fix = "apt install pocketsphinx-en-us (or set the model directory in the config)"
	} else {
		ps.detail += "; model " + modelDir
	}
	checks = append(checks, ps)
	return checks
}

// pkgConfigVersion reports a library's version as pkg-config knows it (libraries that
// have no version function of their own).
func pkgConfigVersion(name string) string {
	out, err := exec.Command("pkg-config", "--modversion", name).Output()
	if err != nil {
		return "linked (version unknown: pkg-config has no " + name + ")"
	}
	return strings.TrimSpace(string(out))
}

func modelChecks(a *app) []check {
	var checks []check
	for _, m := range configuredModels(a) {
		c := check{name: m.role, detail: m.path}
		if st, err := os.Stat(m.path); err == nil && !st.IsDir() {
			c.ok = true
			c.detail = fmt.Sprintf("%s (%.1f MB)", m.path, float64(st.Size())/1e6)
		} else {
			c.detail = m.path + ": not found"
			c.fix = m.fix
		}
		checks = append(checks, c)
	}
	return checks
}

// configuredModel is a model file the agent's configuration points at.
type configuredModel struct {
	role, path, fix string
}

func configuredModels(a *app) []configuredModel {
	shared := func(rel string) string {
		if a.paths.Shared != "" {
			return filepath.Join(a.paths.Shared, rel)
		}
		return filepath.Join(a.paths.Models, filepath.Base(rel))
	}
	return []configuredModel{
		{role: "vad (Silero)", path: shared("models/ggml-silero-v6.2.0.bin"), fix: "agent models pull silero-vad"},
		{role: "llm (demo)", path: shared("models/stories260K.gguf"), fix: "place ../shared beside the project, or set PARLEY_SHARED"},
	}
}

func audioChecks() ([]check, []*portaudio.DeviceInfo) {
	if err := portaudio.Initialize(); err != nil {
		return []check{{warn: true, name: "portaudio", detail: err.Error(), fix: "check that a sound server (PulseAudio/PipeWire) or ALSA is available"}}, nil
	}
	defer portaudio.Terminate()
	var checks []check
	apis, err := portaudio.HostApis()
	if err != nil {
		return []check{{warn: true, name: "host APIs", detail: err.Error()}}, nil
	}
	for _, h := range apis {
		detail := fmt.Sprintf("%d device(s)", len(h.Devices))
		if h.DefaultInputDevice != nil {
			detail += "; default input " + h.DefaultInputDevice.Name
		}
		if h.DefaultOutputDevice != nil {
			detail += "; default output " + h.DefaultOutputDevice.Name
		}
		checks = append(checks, check{ok: true, name: "host API " + h.Name, detail: detail})
	}
	devices, _ := portaudio.Devices()
	var in, out int
	for _, d := range devices {
		if d.MaxInputChannels > 0 {
			in++
		}
		if d.MaxOutputChannels > 0 {
			out++
		}
	}
	fix := "start a sound server (pulseaudio --start) or connect a sound card; 'agent devices' lists what PortAudio sees"
	checks = append(checks,
		check{ok: in > 0, warn: true, name: "input devices", detail: fmt.Sprint(in) + " (needed by 'agent live' only)", fix: fix},
		check{ok: out > 0, warn: true, name: "output devices", detail: fmt.Sprint(out) + " (needed by 'agent live' only)", fix: fix},
	)
	return checks, devices
}

func printDevices(w io.Writer, devices []*portaudio.DeviceInfo) {
	if len(devices) == 0 {
		return
	}
	fmt.Fprintln(w, "audio devices")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for i, d := range devices {
		fmt.Fprintf(tw, "  %d\t%s\t%s\tin %d\tout %d\t%.0f Hz\n", i, d.Name, d.HostApi.Name, d.MaxInputChannels, d.MaxOutputChannels, d.DefaultSampleRate)
	}
	tw.Flush()
	fmt.Fprintln(w)
}
