// Command agent is Parley's command line: the voice agent itself (live, replay, chat) and
// the tools around it (doctor, devices, transcribe, vad, generate, say, models, bench).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/parley-voice/parley/internal/ompwait"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/parley-voice/parley/logging"
	"github.com/parley-voice/parley/modules/console"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/userdirs"
	"go.uber.org/zap"
	"golang.org/x/term"
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
		configCommand(),
		plotCommand(),
		replayCommand(),
		liveCommand(),
		benchCommand(),
		evalCommand(),
		sayCommand(),
		generateCommand(),
		chatCommand(),
		sessionsCommand(),
	}
}

// app is what every subcommand gets: output streams, logger and paths.
type app struct {
	stdout io.Writer
	stderr io.Writer
	// term is the screen the conversation and the console's log lines share (live).
	term   *console.Terminal
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
	// libgomp reads its wait policy before main: a passive one needs a fresh start.
	if err := ompwait.Reexec(); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var interrupt atomic.Pointer[func()]
	// The screen is made here so that the signal goroutine's message, like a log line,
	// lands above a live line in progress.
	screen := console.NewTerminal(os.Stdout, os.Stderr, isTerminal(os.Stdout))
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
				fmt.Fprintln(screen.LogWriter(), "agent: stopping; press Ctrl-C again to quit at once")
				cancel()
			case exitNow:
				os.Exit(signalExitCode(s))
			}
		}
	}()
	code := runWith(ctx, os.Args[1:], screen, &interrupt)
	signal.Stop(sigs)
	cancel()
	os.Exit(code)
}

// run runs the command line with args (tests call it directly).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, console.NewTerminal(stdout, stderr, isTerminal(stdout)), nil)
}

// runWith runs the command line on screen (standard output, standard error, and whether
// the output is a terminal).
func runWith(ctx context.Context, args []string, screen *console.Terminal, interrupt *atomic.Pointer[func()]) int {
	stdout, stderr := screen.Out(), screen.Logs()
	global := flag.NewFlagSet("agent", flag.ContinueOnError)
	global.SetOutput(stderr)
	g := addGlobalFlags(global)
	showVersion := global.Bool("version", false, "print the agent's version and the native libraries it uses, and exit")
	// Help goes to standard output (it was asked for), the usage after a mistake to
	// standard error; the flag package would print both to its output.
	global.Usage = func() {}
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, global)
			return 0
		}
		usage(stderr, global)
		return 2
	}
	if *showVersion {
		writeVersion(stdout)
		return 0
	}
	rest := global.Args()
	if len(rest) == 0 {
		usage(stderr, global)
		return 2
	}
	if rest[0] == "help" {
		usage(stdout, global)
		return 0
	}
	var cmd *command
	for _, c := range commands() {
		if c.Name == rest[0] {
			cmd = &c
			break
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "agent: unknown command %q\n\n", rest[0])
		usage(stderr, global)
		return 2
	}
	// The global flags may follow the command too ("agent live --log-level debug").
	cmdArgs, globalArgs := splitGlobalFlags(global, rest[1:])
	if err := global.Parse(globalArgs); err != nil {
		usage(stderr, global)
		return 2
	}
	modules, err := logging.ParseModuleLevels(*g.logModules)
	if err == nil {
		err = checkLogModules(modules)
	}
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return 2
	}
	level := *g.logLevel
	if level == "" {
		level = cmd.LogLevel
	}
	if level == "" {
		level = "info"
	}
	logCfg := logging.Config{Level: level, Modules: modules, File: *g.logFile, Quiet: *g.quiet}
	logger, closeLog, err := logging.New(logCfg, screen.LogWriter())
	if err != nil {
		fmt.Fprintln(stderr, "agent:", err)
		return 2
	}
	defer closeLog()
	defer routeNativeLogs(logger)()
	a := &app{stdout: stdout, stderr: stderr, term: screen, log: logger, paths: userdirs.FromEnv(), logCfg: logCfg, interrupt: interrupt}
	if err := cmd.Run(ctx, a, cmdArgs); err != nil {
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

// globalFlags are the flags every command takes, before or after the command's name.
type globalFlags struct {
	logLevel, logModules, logFile *string
	quiet                         *bool
}

func addGlobalFlags(fs *flag.FlagSet) globalFlags {
	return globalFlags{
		logLevel:   fs.String("log-level", os.Getenv("PARLEY_LOG_LEVEL"), "default log level: debug, info, warn, error (default info; warn for live, replay and chat)"),
		logModules: fs.String("log-modules", os.Getenv("PARLEY_LOG_MODULES"), "per-module levels, e.g. asr=debug,llm=warn (modules: "+strings.Join(logModuleNames(), ", ")+")"),
		logFile:    fs.String("log-file", os.Getenv("PARLEY_LOG_FILE"), "also write JSON-lines logs to this file"),
		quiet:      fs.Bool("quiet", false, "no log lines on the console"),
	}
}

// splitGlobalFlags takes the global flags (those the logging flags of addGlobalFlags
// define, in any of the flag package's spellings) out of a command's arguments, up to a
// "--". The command gets the rest.
func splitGlobalFlags(global *flag.FlagSet, args []string) (cmdArgs, globalArgs []string) {
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return append(cmdArgs, args[i:]...), globalArgs
		}
		name, hasValue := "", false
		if strings.HasPrefix(arg, "-") && arg != "-" {
			name = strings.TrimLeft(arg, "-")
			name, _, hasValue = strings.Cut(name, "=")
		}
		f := global.Lookup(name)
		if f == nil || name == "version" {
			cmdArgs = append(cmdArgs, arg)
			continue
		}
		globalArgs = append(globalArgs, arg)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); (ok && b.IsBoolFlag()) || hasValue {
			continue
		}
		if i+1 < len(args) {
			i++
			globalArgs = append(globalArgs, args[i])
		}
	}
	return cmdArgs, globalArgs
}

// checkLogModules refuses --log-modules names that no part of the agent logs under (a
// misspelt name would silently change nothing).
func checkLogModules(levels map[string]string) error {
	known := logModuleNames()
	for name := range levels {
		first, _, _ := strings.Cut(name, ".")
		if !slices.Contains(known, first) {
			return fmt.Errorf("--log-modules: unknown module %q (known: %s)", name, strings.Join(known, ", "))
		}
	}
	return nil
}

// logModuleNames lists the loggers --log-modules can set: the agent's parts and the
// native libraries whose lines go to the log.
func logModuleNames() []string {
	names := append(pipeline.LogNames(), nativeLogNames()...)
	slices.Sort(names)
	return slices.Compact(names)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func usage(w io.Writer, global *flag.FlagSet) {
	fmt.Fprintln(w, "usage: agent [global flags] COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	cmds := commands()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name < cmds[j].Name })
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-11s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintln(w, "\nglobal flags (before or after the command):")
	global.SetOutput(w)
	global.PrintDefaults()
	global.SetOutput(io.Discard)
	fmt.Fprintln(w, "\nRun 'agent COMMAND -h' for a command's flags.")
}

// flagOutput is a subcommand flag set's output: mistakes and their usage go to stderr,
// the usage asked for with -h to stdout.
type flagOutput struct {
	stdout, stderr io.Writer
	usage          func(w io.Writer)
}

func (o *flagOutput) Write(p []byte) (int, error) { return o.stderr.Write(p) }

// newFlags returns a flag set for a subcommand; its Usage prints to a.stderr, and -h
// prints the usage to a.stdout (see parseFlags).
func newFlags(a *app, name, argsUsage string) *flag.FlagSet {
	fs := flag.NewFlagSet("agent "+name, flag.ContinueOnError)
	out := &flagOutput{stdout: a.stdout, stderr: a.stderr}
	out.usage = func(w io.Writer) {
		fmt.Fprintf(w, "usage: agent %s [flags] %s\n", name, argsUsage)
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(out)
		fmt.Fprintln(w, "  (and the global flags: see 'agent --help')")
	}
	fs.SetOutput(out)
	fs.Usage = func() { out.usage(a.stderr) }
	return fs
}

// parseFlags parses args, allowing flags after positional arguments too
// ("agent vad file.wav --threshold 0.5").
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	out, _ := fs.Output().(*flagOutput)
	if out != nil {
		// The flag package calls Usage for -h and for mistakes alike; parseFlags prints
		// it to the right stream itself.
		usage := fs.Usage
		fs.Usage = func() {}
		defer func() { fs.Usage = usage }()
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				if out != nil {
					out.usage(out.stdout)
				}
				return nil, err
			}
			if out != nil {
				out.usage(out.stderr)
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

// flagSet reports whether the command line set the flag called name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// usageErrorf returns an error marked as a usage error.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}
