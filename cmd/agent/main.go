// Command agent is Parley's command line: the voice agent itself (live, replay, chat) and
// the tools around it (doctor, devices, transcribe, vad, generate, say, models, bench).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/parley-voice/parley/logging"
	"github.com/parley-voice/parley/userdirs"
	"go.uber.org/zap"
)

// command is one subcommand. Run parses its own flags from args.
type command struct {
	Name    string
	Summary string
	Run     func(ctx context.Context, a *app, args []string) error
	// LogLevel is the command's default log level when the user sets none ("info" when
	// empty); commands that show the conversation keep the console for it.
	LogLevel string
}

// commands lists every subcommand; each lives in its own cmd_*.go file.
func commands() []command {
	return []command{
		doctorCommand(),
		devicesCommand(),
		transcribeCommand(),
		vadCommand(),
		werCommand(),
		modelsCommand(),
		plotCommand(),
		replayCommand(),
		liveCommand(),
		benchCommand(),
		sayCommand(),
		generateCommand(),
		chatCommand(),
	}
}

// app is what every subcommand gets: output streams, logger and paths.
type app struct {
	stdout io.Writer
	stderr io.Writer
	log    *zap.Logger
	paths  userdirs.Paths
	logCfg logging.Config
	// interrupt, when it holds a function, receives Ctrl-C instead of the command's
	// context being cancelled (main's signal goroutine reads it).
	interrupt *atomic.Pointer[func()]
}

// onInterrupt routes Ctrl-C to f until the returned function is called.
func (a *app) onInterrupt(f func()) (restore func()) {
	if a.interrupt == nil {
		return func() {}
	}
	a.interrupt.Store(&f)
	return func() { a.interrupt.CompareAndSwap(&f, nil) }
}

// errUsage marks errors that are about how the command was called (exit status 2).
var errUsage = errors.New("usage")

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	var interrupt atomic.Pointer[func()]
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		var policy signalPolicy
		for s := range sigs {
			f := interrupt.Load()
			switch policy.decide(s, time.Now(), f != nil) {
			case toHandler:
				(*f)()
			case stopGracefully:
				fmt.Fprintln(os.Stderr, "agent: stopping; press Ctrl-C again to quit at once")
				cancel()
			case exitNow:
				os.Exit(signalExitCode(s))
			}
		}
	}()
	code := runWith(ctx, os.Args[1:], os.Stdout, os.Stderr, &interrupt)
	signal.Stop(sigs)
	cancel()
	os.Exit(code)
}

// run runs the command line with args (tests call it directly).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, stdout, stderr, nil)
}

func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, interrupt *atomic.Pointer[func()]) int {
	global := flag.NewFlagSet("agent", flag.ContinueOnError)
	global.SetOutput(stderr)
	logLevel := global.String("log-level", os.Getenv("PARLEY_LOG_LEVEL"), "default log level: debug, info, warn, error (default info; warn for live, replay and chat)")
	logModules := global.String("log-modules", os.Getenv("PARLEY_LOG_MODULES"), "per-module levels, e.g. asr=debug,llm=warn")
	logFile := global.String("log-file", os.Getenv("PARLEY_LOG_FILE"), "also write JSON-lines logs to this file")
	quiet := global.Bool("quiet", false, "no log lines on the console")
	global.Usage = func() { usage(stderr, global) }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	rest := global.Args()
	if len(rest) == 0 {
		usage(stderr, global)
		return 2
	}
	var cmd *command
	for _, c := range commands() {
		if c.Name == rest[0] {
			cmd = &c
			break
		}
	}
	if rest[0] == "help" {
		usage(stdout, global)
		return 0
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "agent: unknown command %q\n\n", rest[0])
		usage(stderr, global)
		return 2
	}
	modules, err := logging.ParseModuleLevels(*logModules)
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return 2
	}
	level := *logLevel
	if level == "" {
		level = cmd.LogLevel
	}
	if level == "" {
		level = "info"
	}
	logCfg := logging.Config{Level: level, Modules: modules, File: *logFile, Quiet: *quiet}
	logger, closeLog, err := logging.New(logCfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return 2
	}
	defer closeLog()
	quietNativeLogs(logCfg.Level)
	a := &app{stdout: stdout, stderr: stderr, log: logger, paths: userdirs.FromEnv(), logCfg: logCfg, interrupt: interrupt}
	if err := cmd.Run(ctx, a, rest[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "agent %s: %v\n", cmd.Name, err)
		if errors.Is(err, errUsage) {
			return 2
		}
		return 1
	}
	return 0
}

func usage(w io.Writer, global *flag.FlagSet) {
	fmt.Fprintln(w, "usage: agent [global flags] COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	cmds := commands()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-11s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\nglobal flags:")
	global.SetOutput(w)
	global.PrintDefaults()
	fmt.Fprintln(w, "\nRun 'agent COMMAND -h' for a command's flags.")
}

// newFlags returns a flag set for a subcommand that prints its usage to a.stderr.
func newFlags(a *app, name, argsUsage string) *flag.FlagSet {
	fs := flag.NewFlagSet("agent "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintf(a.stderr, "usage: agent %s [flags] %s\n", name, argsUsage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, allowing flags after positional arguments too
// ("agent vad file.wav --threshold 0.5").
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// usageErrorf returns an error marked as a usage error.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}
