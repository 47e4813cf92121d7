// Package pulsetest runs a private PulseAudio daemon, so that tests, benchmarks and the
// lead's end-to-end runs can push audio through the real sound-server path (PortAudio →
// ALSA → PulseAudio) on a machine without sound hardware: null sinks stand in for
// speakers, and their monitors for microphones.
//
// Every server lives in its own directory (socket, runtime and state directories,
// cookie, client configuration and log), never touches the user's PulseAudio, and
// never lets a client autospawn a daemon. Start is for any code; New is the test helper
// that also points the test process at the server and stops it at cleanup.
package pulseserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/parley-voice/parley/internal/regularfile"
)

// ErrNotInstalled is wrapped by Start's error when pulseaudio or its client tools
// (pactl, paplay, parecord from pulseaudio-utils) are not on PATH.
var ErrNotInstalled = errors.New("pulseaudio is not installed")

// Options configure Start.
type Options struct {
	// StartTimeout bounds the daemon's start-up (10 s when zero).
	StartTimeout time.Duration
	// LogLevel is the daemon's log level (error, warn, notice, info, debug); "info" when
	// empty, which is the least that announces the end of start-up.
	LogLevel string
	// NoRealtime keeps the daemon's threads at normal priority. By default the daemon
	// raises them to real-time priority where it may, as a desktop daemon does: on a busy
	// machine a normal-priority sound server stalls for hundreds of milliseconds, which
	// shows up as gaps in every recording.
	NoRealtime bool
}

// Server is a running private PulseAudio daemon.
type Server struct {
	dir     string
	socket  string
	logPath string
	env     []string // the client environment (see ClientEnv)

	cmd    *exec.Cmd
	exited chan struct{} // closed when the daemon process has exited
	waitMu sync.Mutex
	err    error // the daemon's exit status, valid after exited is closed

	logDone chan struct{} // closed when the log copier has finished

	procMu sync.Mutex
	procs  map[*Process]struct{} // client tools still running; Close stops them
}

// Start starts a daemon whose files live in dir (created if needed; the caller owns it
// and removes it), with the given Options (at most one; the defaults without). The
// daemon keeps running after ctx is done; ctx bounds the start-up only. Close stops it.
func Start(ctx context.Context, dir string, options ...Options) (*Server, error) {
	var opts Options
	switch len(options) {
	case 0:
	case 1:
		opts = options[0]
	default:
		return nil, errors.New("pulseserver: Start takes at most one Options")
	}
	for _, tool := range []string{"pulseaudio", "pactl", "paplay", "parecord"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("pulseserver: %w: %s not found (Debian: apt install pulseaudio pulseaudio-utils)", ErrNotInstalled, tool)
		}
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pulseserver: %w", err)
	}
	// The socket path must fit sockaddr_un (108 bytes).
	socket := filepath.Join(dir, "native")
	if len(socket) >= 100 {
		return nil, fmt.Errorf("pulseserver: directory %s is too long for a unix socket path", dir)
	}
	for _, sub := range []string{"runtime", "state", "config", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("pulseserver: %w", err)
		}
	}
	clientConf := filepath.Join(dir, "client.conf")
	// Clients must talk to this server only, and never start a daemon of their own when
	// it is gone (that is what device-loss tests provoke).
	conf := fmt.Sprintf("autospawn = no\ndefault-server = unix:%s\ncookie-file = %s\n", socket, filepath.Join(dir, "cookie"))
	// The folder can be one a user named ('agent bench --live -o DIR'): its files are
	// written only as regular files.
	if err := regularfile.WriteFile(clientConf, []byte(conf), 0o600); err != nil {
		return nil, fmt.Errorf("pulseserver: %w", err)
	}
	s := &Server{
		dir:     dir,
		socket:  socket,
		logPath: filepath.Join(dir, "pulseaudio.log"),
		exited:  make(chan struct{}),
		logDone: make(chan struct{}),
		procs:   make(map[*Process]struct{}),
		env: []string{
			"PULSE_SERVER=unix:" + socket,
			"PULSE_CLIENTCONFIG=" + clientConf,
			"PULSE_COOKIE=" + filepath.Join(dir, "cookie"),
		},
	}
	logFile, err := regularfile.Create(s.logPath, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pulseserver: %w", err)
	}
	level := opts.LogLevel
	if level == "" {
		level = "info"
	}
	rt := "yes"
	if opts.NoRealtime {
		rt = "no"
	}
	args := []string{
		"--daemonize=no", "--system=false", "-n", "--fail=true",
		"--exit-idle-time=-1", "--use-pid-file=false", "--disallow-exit=false",
		"--realtime=" + rt, "--high-priority=" + rt,
		"--log-target=stderr", "--log-level=" + level,
		"--load=module-native-protocol-unix socket=" + socket + " auth-anonymous=1",
	}
	cmd := exec.Command("pulseaudio", args...)
	cmd.Env = append(withoutPulseEnv(os.Environ()),
		"HOME="+filepath.Join(dir, "home"),
		"XDG_RUNTIME_DIR="+dir,
		"PULSE_RUNTIME_PATH="+filepath.Join(dir, "runtime"),
		"PULSE_STATE_PATH="+filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		// No session bus exists here; say so instead of letting it try to start one.
		"DBUS_SESSION_BUS_ADDRESS=disabled:",
	)
	cmd.SysProcAttr = daemonAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("pulseserver: %w", err)
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("pulseserver: start pulseaudio: %w", err)
	}
	s.cmd = cmd
	ready := make(chan struct{})
	go s.copyLog(stderr, logFile, ready)
	go func() {
		<-s.logDone // Wait must not run before the pipe is drained
		err := cmd.Wait()
		s.waitMu.Lock()
		s.err = err
		s.waitMu.Unlock()
		close(s.exited)
	}()

	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-ready:
	case <-s.exited:
		return nil, fmt.Errorf("pulseserver: pulseaudio exited during start-up (%v); log:\n%s", s.exitErr(), s.LogTail(20))
	case <-timer.C:
		s.Close()
		return nil, fmt.Errorf("pulseserver: pulseaudio did not finish starting within %v; log:\n%s", timeout, s.LogTail(20))
	case <-ctx.Done():
		s.Close()
		return nil, fmt.Errorf("pulseserver: start pulseaudio: %w", ctx.Err())
	}
	// The log line says the daemon is up; a real client round trip proves that the
	// socket answers.
	if _, err := s.Pactl(ctx, "info"); err != nil {
		s.Close()
		return nil, fmt.Errorf("pulseserver: server started but does not answer: %w", err)
	}
	return s, nil
}

// startupComplete is what pulseaudio logs (at info level) when it accepts clients.
const startupComplete = "Daemon startup complete."

// copyLog writes the daemon's stderr to its log file and closes ready at the line that
// announces the end of start-up. It owns logFile and ends when the daemon does.
func (s *Server) copyLog(r io.Reader, logFile *os.File, ready chan struct{}) {
	defer close(s.logDone)
	defer logFile.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	signalled := false
	for sc.Scan() {
		line := sc.Bytes()
		logFile.Write(line)
		logFile.Write([]byte{'\n'})
		if !signalled && strings.Contains(string(line), startupComplete) {
			signalled = true
			close(ready)
		}
	}
	// A line too long for the scanner ends the loop early; keep draining so that the
	// daemon never blocks on a full pipe. If start-up was never announced, ready stays
	// open and the process's exit reports the failure.
	io.Copy(logFile, r)
}

func withoutPulseEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "PULSE_"), name == "HOME", name == "XDG_RUNTIME_DIR", name == "XDG_CONFIG_HOME", name == "DBUS_SESSION_BUS_ADDRESS":
			continue
		}
		out = append(out, kv)
	}
	return out
}

func (s *Server) exitErr() error {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	return s.err
}

// Dir returns the server's directory.
func (s *Server) Dir() string { return s.dir }

// Address returns the server address for PULSE_SERVER ("unix:/path/native").
func (s *Server) Address() string { return "unix:" + s.socket }

// Pid returns the daemon's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// ClientEnv returns the environment (KEY=VALUE) that points PulseAudio clients at this
// server: libpulse, and through it ALSA's pulse plugin and so PortAudio.
func (s *Server) ClientEnv() []string { return append([]string(nil), s.env...) }

// ApplyEnv points this process's PulseAudio clients at the server by setting
// ClientEnv in the process environment, and returns a function that restores the
// previous values. PortAudio reads the environment when it opens streams and scans
// devices, so apply it before opening a portaudio.Host. It is process-wide: tests that use
// it must not run in parallel.
func (s *Server) ApplyEnv() (restore func()) {
	type saved struct {
		name, value string
		had         bool
	}
	var prev []saved
	for _, kv := range s.env {
		name, value, _ := strings.Cut(kv, "=")
		old, had := os.LookupEnv(name)
		prev = append(prev, saved{name, old, had})
		os.Setenv(name, value)
	}
	return func() {
		for _, p := range prev {
			if p.had {
				os.Setenv(p.name, p.value)
			} else {
				os.Unsetenv(p.name)
			}
		}
	}
}

// Exited is closed when the daemon process has exited (after Close or Kill, or a crash).
func (s *Server) Exited() <-chan struct{} { return s.exited }

// Close stops the client tools still running (recordings finish their files), then the
// daemon (SIGTERM, then SIGKILL after 5 s), and waits for them. It is safe to call more
// than once, and after Kill.
func (s *Server) Close() error {
	s.procMu.Lock()
	procs := make([]*Process, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	s.procMu.Unlock()
	for _, p := range procs {
		_ = p.Stop()
	}
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case <-s.exited:
		return nil
	case <-timer.C:
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("pulseserver: pulseaudio ignored SIGTERM for 5 s and was killed")
	}
}

// Kill kills the daemon at once (SIGKILL), the way a crashed sound server disappears,
// and waits for it to exit.
func (s *Server) Kill() error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pulseserver: kill pulseaudio: %w", err)
	}
	<-s.exited
	return nil
}

// LogTail returns the last n lines of the daemon's log.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogPath returns the daemon's log file.
func (s *Server) LogPath() string { return s.logPath }

// commandTimeout bounds every client tool run, so that a wedged server fails the caller
// (a test, the bench) instead of hanging it.
const commandTimeout = 20 * time.Second

func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(withoutPulseEnv(os.Environ()), s.env...)
	cmd.Env = append(cmd.Env, "HOME="+filepath.Join(s.dir, "home"))
	return cmd
}

// Pactl runs pactl against the server and returns its standard output.
func (s *Server) Pactl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := s.command(ctx, "pactl", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("pulseserver: pactl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Sink is a null sink: an output that plays into nothing, at the server's real-time
// pace, whose monitor source carries everything played into it.
type Sink struct {
	Name string
	// Monitor is the source that records what the sink plays.
	Monitor string
	// Module is the index of the module that made the sink; unloading it removes the
	// sink and ends every stream on it.
	Module int
}

// SinkOptions describe a null sink's sample format; zero values take the server's
// default (s16le, 2 channels, 44100 Hz).
type SinkOptions struct {
	Rate     int
	Channels int
	// Description is what the server shows people ("WH-1000XM4 headset"); the sink's
	// name when empty.
	Description string
	// Rewinds keeps the null sink as PulseAudio makes it by default (module-always-sink's
	// auto_null, for one): rewinding, and while nothing plays, running at its two-second
	// maximum latency, so that its monitor delivers the first audio of a new recording
	// only about two seconds later. LoadNullSink's own default is norewinds=1.
	Rewinds bool
}

// LoadNullSink adds a null sink called name.
//
// The sink is loaded with norewinds=1. With rewinds enabled, PulseAudio 17's null sink
// played at about a third of real time here whenever a client asked for a low latency
// (a one-second file took three seconds through paplay, and its monitor delivered a third
// of the samples it should have), which breaks every timing measurement.
func (s *Server) LoadNullSink(ctx context.Context, name string, opts SinkOptions) (Sink, error) {
	desc := opts.Description
	if desc == "" {
		desc = name
	}
	args := []string{"load-module", "module-null-sink", "sink_name=" + name,
		"sink_properties=" + descriptionProperty(desc)}
	if !opts.Rewinds {
		args = append(args, "norewinds=1")
	}
	if opts.Rate > 0 {
		args = append(args, "rate="+strconv.Itoa(opts.Rate))
	}
	if opts.Channels > 0 {
		args = append(args, "channels="+strconv.Itoa(opts.Channels))
	}
	out, err := s.Pactl(ctx, args...)
	if err != nil {
		return Sink{}, err
	}
	idx, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return Sink{}, fmt.Errorf("pulseserver: load-module printed %q, not a module index", out)
	}
	return Sink{Name: name, Monitor: name + ".monitor", Module: idx}, nil
}

// descriptionProperty is a module argument's property list that sets device.description:
// the module argument is quoted with double quotes, the property value within it with
// single quotes (descriptions have spaces).
func descriptionProperty(desc string) string {
	return `"device.description='` + strings.NewReplacer(`'`, ``, `"`, ``).Replace(desc) + `'"`
}

// Source is a virtual source: an input that carries what its master source records.
type Source struct {
	Name string
	// Module is the index of the module that made the source.
	Module int
}

// LoadVirtualSource adds a source called name, described as description, that carries
// what master records (for example a null sink's monitor, so that what a test plays into
// the sink arrives on the source as from a microphone). It uses module-remap-source.
func (s *Server) LoadVirtualSource(ctx context.Context, name, description, master string) (Source, error) {
	out, err := s.Pactl(ctx, "load-module", "module-remap-source", "source_name="+name, "master="+master,
		"source_properties="+descriptionProperty(description))
	if err != nil {
		return Source{}, err
	}
	idx, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return Source{}, fmt.Errorf("pulseserver: load-module printed %q, not a module index", out)
	}
	return Source{Name: name, Module: idx}, nil
}

// RecordingFrom returns the names of the sources that the server's recording streams
// (source outputs) record from, one per stream.
func (s *Server) RecordingFrom(ctx context.Context) ([]string, error) {
	return s.streamDevices(ctx, "source-outputs", "sources")
}

// PlayingTo returns the names of the sinks that the server's playback streams (sink
// inputs) play to, one per stream.
func (s *Server) PlayingTo(ctx context.Context) ([]string, error) {
	return s.streamDevices(ctx, "sink-inputs", "sinks")
}

// streamDevices maps each stream of kind (pactl's "list short" has the device's index in
// the second column) to the name of its device among devices.
func (s *Server) streamDevices(ctx context.Context, kind, devices string) ([]string, error) {
	out, err := s.Pactl(ctx, "list", "short", devices)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Split(line, "\t"); len(f) >= 2 {
			names[f[0]] = f[1]
		}
	}
	out, err = s.Pactl(ctx, "list", "short", kind)
	if err != nil {
		return nil, err
	}
	var used []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Split(line, "\t"); len(f) >= 2 {
			name, ok := names[f[1]]
			if !ok {
				name = "#" + f[1]
			}
			used = append(used, name)
		}
	}
	return used, nil
}

// UnloadModule unloads a module, for example a sink's, which makes the sink vanish
// under whatever plays into or records from it.
func (s *Server) UnloadModule(ctx context.Context, module int) error {
	_, err := s.Pactl(ctx, "unload-module", strconv.Itoa(module))
	return err
}

// SetDefaultSink makes name the sink that clients without an explicit device use, which
// is where ALSA's "pulse" and "default" devices (and so PortAudio's) play.
func (s *Server) SetDefaultSink(ctx context.Context, name string) error {
	_, err := s.Pactl(ctx, "set-default-sink", name)
	return err
}

// SetDefaultSource makes name (for example a sink's monitor) the source that ALSA's
// "pulse" and "default" devices record from.
func (s *Server) SetDefaultSource(ctx context.Context, name string) error {
	_, err := s.Pactl(ctx, "set-default-source", name)
	return err
}

// Play plays a WAV file into sink with paplay and returns when it has been played.
func (s *Server) Play(ctx context.Context, sink, wavPath string) error {
	p, err := s.StartPlay(ctx, sink, wavPath)
	if err != nil {
		return err
	}
	return p.Wait()
}

// Process is a running client tool (paplay or parecord).
type Process struct {
	name   string
	cmd    *exec.Cmd
	stderr *strings.Builder
	done   chan struct{}
	err    error
}

func (s *Server) start(ctx context.Context, name string, args ...string) (*Process, error) {
	cmd := s.command(ctx, name, args...)
	p := &Process{name: name, cmd: cmd, stderr: &strings.Builder{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	// Ask politely first on cancellation, so that parecord can finish its file.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pulseserver: start %s: %w", name, err)
	}
	s.procMu.Lock()
	s.procs[p] = struct{}{}
	s.procMu.Unlock()
	go func() {
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("pulseserver: %s: %w: %s", name, err, strings.TrimSpace(p.stderr.String()))
		}
		p.err = err
		s.procMu.Lock()
		delete(s.procs, p)
		s.procMu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// StartPlay starts playing a WAV file into sink and returns at once.
//
// paplay buffers 200 ms: a busy machine that delays a low-latency client makes the sink
// play silence in the middle of the file, and tests compare what they record with the
// file. Tests that measure time do so from where the audio appears on the sink's
// monitor, not from when paplay started.
func (s *Server) StartPlay(ctx context.Context, sink, wavPath string) (*Process, error) {
	return s.start(ctx, "paplay", "--device="+sink, "--latency-msec=200", wavPath)
}

// Wait waits for the process to end and returns its error.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Stop asks the process to finish (SIGINT: parecord completes its file) and waits.
func (p *Process) Stop() error {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		<-p.done
	}
	if p.err != nil {
		var exit *exec.ExitError
		// Ended by our SIGINT is the normal way for a recording to end.
		if errors.As(p.err, &exit) && exit.ProcessState != nil {
			if ws, ok := exit.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
				return nil
			}
		}
	}
	return p.err
}

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// RecordOptions describe a recording's format; zero values mean 48000 Hz, mono.
type RecordOptions struct {
	Rate     int
	Channels int
	// Latency is the buffering parecord asks for (10 ms when zero), which bounds how
	// late the last samples reach the file when the recording stops.
	Latency time.Duration
}

// Record records source (for example a sink's Monitor) into a 16-bit WAV file with
// parecord until the returned process is stopped.
func (s *Server) Record(ctx context.Context, source, wavPath string, opts RecordOptions) (*Process, error) {
	if opts.Rate <= 0 {
		opts.Rate = 48000
	}
	if opts.Channels <= 0 {
		opts.Channels = 1
	}
	if opts.Latency <= 0 {
		opts.Latency = 10 * time.Millisecond
	}
	return s.start(ctx, "parecord", "--device="+source, "--file-format=wav", "--format=s16le",
		"--rate="+strconv.Itoa(opts.Rate), "--channels="+strconv.Itoa(opts.Channels),
		"--latency-msec="+strconv.FormatInt(opts.Latency.Milliseconds(), 10), wavPath)
}
