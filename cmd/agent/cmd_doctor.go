package main

import (
	"context"
	"fmt"
	"github.com/parley-voice/parley/internal/ompwait"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/parley-voice/parley/engines/espeak"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/engines/pocketsphinx"
	"github.com/parley-voice/parley/engines/portaudio"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/modelstore"
	"github.com/parley-voice/parley/pipeline"
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
	cfgPath := configFlag(fs)
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, from, cfgErr := loadAgentConfig(a, *cfgPath)
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
	if cfgErr != nil {
		section("configuration", []check{{name: "config", detail: cfgErr.Error(), fix: "fix the file, or run without --config to use the defaults"}})
	} else {
		section("models (config: "+from+")", modelChecks(a, cfg))
	}
	audio, devices := audioChecks()
	section("audio", audio)
	printDevices(a.stdout, devices)
	if cfgErr == nil {
		section("echo cancellation", echoChecks(ctx, cfg))
		section("threads", threadChecks(cfg))
	}
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
		check{ok: true, name: "portaudio", detail: portaudio.Version()},
	)
	ev, data := espeak.Version()
	if data != "" {
		ev += " (data " + data + ")"
	}
	checks = append(checks, check{ok: true, name: "espeak-ng", detail: ev})

	ps := check{ok: true, name: "pocketsphinx", detail: pkgConfigVersion("pocketsphinx") + "; models in " + pocketsphinx.DefaultModelDir()}
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

// modelChecks checks the models and what else the configured engines need
// (pipeline.EngineCatalog says what each needs).
func modelChecks(a *app, cfg pipeline.Config) []check {
	fix := func(path string) string {
		for _, m := range modelstore.Builtin() {
			if filepath.Base(path) == m.File {
				return "agent models pull " + m.Name
			}
		}
		return "point the config at an existing file, or run 'agent models list' for downloadable ones"
	}
	needs := []pipeline.Need{{What: "vad (Silero)", Path: cfg.VAD.Model, Model: true}}
	for _, e := range pipeline.ConfiguredEngines(cfg) {
		needs = append(needs, e.Needs(cfg)...)
	}
	var checks []check
	for _, n := range needs {
		c := check{ok: true, name: n.What, detail: n.Detail, fix: n.Fix}
		if n.Model && c.fix == "" {
			c.fix = fix(n.Path)
		}
		if n.Path != "" {
			st, err := os.Stat(n.Path)
			c.ok = err == nil && (!n.Model || !st.IsDir())
			switch {
			case c.ok && n.Model:
				c.detail = fmt.Sprintf("%s (%.1f MB)", n.Path, float64(st.Size())/1e6)
			case n.Model:
				c.detail = n.Path + ": not found"
			}
		}
		checks = append(checks, c)
	}
	return checks
}

func audioChecks() ([]check, []portaudio.Info) {
	h, err := portaudio.Open(portaudio.Options{})
	if err != nil {
		return []check{{warn: true, name: "portaudio", detail: err.Error(), fix: "check that a sound server (PulseAudio/PipeWire) or ALSA is available"}}, nil
	}
	defer h.Close()
	apis, err := h.HostAPIs()
	if err != nil {
		return []check{{warn: true, name: "host APIs", detail: err.Error()}}, nil
	}
	devices, err := h.Devices()
	if err != nil {
		return []check{{warn: true, name: "devices", detail: err.Error()}}, nil
	}
	var checks []check
	for _, api := range apis {
		detail := fmt.Sprintf("%d device(s)", api.DeviceCount)
		for _, d := range devices {
			if d.HostAPI == api.Name && d.IsDefaultInput {
				detail += "; default input " + d.Name
			}
			if d.HostAPI == api.Name && d.IsDefaultOutput {
				detail += "; default output " + d.Name
			}
		}
		checks = append(checks, check{ok: true, name: "host API " + api.Name, detail: detail})
	}
	var in, out int
	for _, d := range devices {
		if d.Has(portaudio.Input) {
			in++
		}
		if d.Has(portaudio.Output) {
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

// echoChecks says whether a live session would cancel echo (audio.echo_cancel) and
// why, and whether the canceller's engine works.
func echoChecks(ctx context.Context, cfg pipeline.Config) []check {
	engine := cfg.Audio.EchoEngine
	if engine == "" {
		engine = pipeline.DefaultEngine(pipeline.KeyEchoEngine)
	}
	s := pipeline.ResolveEchoCancel(ctx, cfg.Audio)
	state := "off"
	if s.Decision.On {
		state = "on, engine " + engine
	}
	checks := []check{{ok: true, name: "echo_cancel", detail: fmt.Sprintf("%s → %s: %s", cfg.Audio.EchoCancelMode(), state, s.Decision.Reason)}}
	if s.Server != "" {
		checks = append(checks, check{ok: true, name: "sound server", detail: fmt.Sprintf("%s; output %s; input %s",
			s.Server, strings.Join(s.Devices.Output.Names, " / "), strings.Join(s.Devices.Input.Names, " / "))})
	}
	for _, p := range s.Problems {
		checks = append(checks, check{warn: true, name: "echo_cancel", detail: "decided without knowing: " + p,
			fix: "set audio.echo_cancel to on (laptop speakers) or off (a headset) in the config"})
	}
	if err := pipeline.CheckAECEngine(engine); err != nil {
		checks = append(checks, check{name: "echo canceller", detail: err.Error(),
			fix: "install webrtc-audio-processing (Debian: libwebrtc-audio-processing-dev), or set audio.echo_engine: speex"})
	} else {
		checks = append(checks, check{ok: true, name: "echo canceller", detail: engine + " opens"})
	}
	return checks
}

func printDevices(w io.Writer, devices []portaudio.Info) {
	if len(devices) == 0 {
		return
	}
	fmt.Fprintln(w, "audio devices")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, d := range devices {
		fmt.Fprintf(tw, "  %d\t%s\t%s\tin %d\tout %d\t%.0f Hz\n", d.Index, d.Name, d.HostAPI, d.MaxInputChannels, d.MaxOutputChannels, d.DefaultSampleRate)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// threadChecks shows the thread plan (the config's cores and engines' threads), and warns
// when OpenMP threads spin: idle, they would take the cores the plan gives the others.
func threadChecks(cfg pipeline.Config) []check {
	plan := cfg.Threads()
	c := check{ok: true, name: "thread plan", detail: plan.String()}
	if _, spinning := ompwait.Environ(os.Environ()); spinning {
		c.ok, c.warn = false, true
		c.fix = "run agent itself (it sets OMP_WAIT_POLICY=passive), or set OMP_WAIT_POLICY=passive"
	}
	return []check{c}
}
