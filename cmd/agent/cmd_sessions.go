package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/ellipsis"
	"github.com/parley-voice/parley/pipeline"
)

func sessionsCommand() command {
	return command{
		Name:    "sessions",
		Summary: "list the saved sessions (name, date, turns, last line); continue one with 'agent live --resume NAME' or 'agent chat --resume NAME'",
		Run:     runSessions,
	}
}

func runSessions(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "sessions", "")
	cfgPath := configFlag(fs)
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("sessions takes no arguments")
	}
	cfg, _, err := loadAgentConfig(a, *cfgPath)
	if err != nil {
		return err
	}
	if cfg.Session.Dir == "" {
		fmt.Fprintln(a.stdout, "sessions are off (no session.dir in the config)")
		return nil
	}
	list, err := dialogue.ListSessions(cfg.Session.Dir)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		fmt.Fprintf(a.stdout, "no saved sessions in %s\n", cfg.Session.Dir)
		return nil
	}
	fmt.Fprintf(a.stdout, "sessions in %s (oldest first):\n", cfg.Session.Dir)
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tSAVED\tTURNS\tLAST LINE")
	for _, s := range list {
		if s.Err != nil {
			fmt.Fprintf(tw, "  %s\t-\t-\tcannot be read: %v\n", s.Name, s.Err)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", s.Name, s.SavedAt.Local().Format("2006-01-02 15:04"), s.Turns, lastLine(s))
	}
	tw.Flush()
	return nil
}

// lastLine shows a session's last utterance the way the console shows a line.
func lastLine(s dialogue.SessionSummary) string {
	if s.Turns == 0 {
		return "(nothing said)"
	}
	who := "you  "
	if s.Last.Speaker == dialogue.Agent {
		who = "agent"
	}
	text := strings.Join(strings.Fields(s.Last.Text), " ")
	if s.Last.Interrupted {
		text += " —(interrupted)"
	}
	return who + " › " + ellipsis.Cut(text, 60)
}

// sessionFlags are the flags of the commands that hold a conversation (live, chat):
// --session NAME names a new session, --resume NAME continues a saved one.
type sessionFlags struct {
	name   *string
	resume resumeFlag
}

// resumeFlag is --resume: alone it continues the session --session names; with a
// name (--resume NAME or --resume=NAME) it continues that one.
type resumeFlag struct {
	set  bool
	name string
}

func (r *resumeFlag) String() string   { return r.name }
func (r *resumeFlag) IsBoolFlag() bool { return true }
func (r *resumeFlag) Set(v string) error {
	switch v {
	case "true":
		r.set = true
	case "false":
		r.set, r.name = false, ""
	default:
		r.set, r.name = true, v
	}
	return nil
}

func addSessionFlags(fs *flag.FlagSet) *sessionFlags {
	sf := &sessionFlags{}
	sf.name = fs.String("session", "", "save the conversation as session NAME in the config's session directory (default: a new session named by date and time)")
	fs.Var(&sf.resume, "resume", "continue the saved session `NAME` (alone: the one --session names); 'agent sessions' lists them")
	return sf
}

// apply sets the session the flags name in cfg and returns its directory ("" when
// sessions are off) and the positional arguments that are not a --resume NAME. A saved
// session that would be overwritten, or one to resume that does not exist, is an error
// that lists the saved sessions.
func (sf *sessionFlags) apply(cfg *pipeline.Config, rest []string) (string, []string, error) {
	if sf.resume.set {
		name := sf.resume.name
		if name == "" && *sf.name == "" && len(rest) > 0 {
			// --resume NAME: a bool-like flag leaves its value among the arguments.
			name, rest = rest[0], rest[1:]
		}
		switch {
		case name != "" && *sf.name != "" && name != *sf.name:
			return "", nil, usageErrorf("--resume %s and --session %s name different sessions", name, *sf.name)
		case name == "":
			name = *sf.name
		}
		if name != "" {
			if err := dialogue.ValidSessionName(name); err != nil {
				return "", nil, usageErrorf("--resume: %v", err)
			}
		}
		cfg.Session.Name = name
		cfg.Session.Resume = true
	} else if *sf.name != "" {
		// Checked now, before anything is asked of the user, not at the first save.
		if err := dialogue.ValidSessionName(*sf.name); err != nil {
			return "", nil, usageErrorf("--session: %v", err)
		}
		cfg.Session.Name = *sf.name
	}
	if cfg.Session.Resume && cfg.Session.Name == "" {
		return "", nil, usageErrorf("--resume needs the name of a saved session%s", savedSessionsHint(cfg.Session.Dir))
	}
	if cfg.Session.Resume && cfg.Session.Dir == "" {
		return "", nil, usageErrorf("--resume needs a session directory (session.dir in the config)")
	}
	// A new session without a name gets a free one named by the time.
	dir, err := pipeline.SessionPath(*cfg)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	if dir == "" {
		return "", rest, nil
	}
	_, statErr := os.Lstat(filepath.Join(dir, dialogue.SessionFile))
	switch {
	case cfg.Session.Resume && errors.Is(statErr, os.ErrNotExist):
		return "", nil, fmt.Errorf("no saved session %q in %s%s", cfg.Session.Name, cfg.Session.Dir, savedSessionsHint(cfg.Session.Dir))
	case !cfg.Session.Resume && statErr == nil:
		// Starting afresh would overwrite the saved conversation at the first save.
		return "", nil, usageErrorf("session %q already exists in %s: add --resume to continue it, or choose another name", cfg.Session.Name, cfg.Session.Dir)
	}
	return dir, rest, nil
}

// savedSessionsHint lists the sessions saved in dir, for an error about a session name.
func savedSessionsHint(dir string) string {
	list, err := dialogue.ListSessions(dir)
	if err != nil || len(list) == 0 {
		return " (there are no saved sessions)"
	}
	names := make([]string, 0, len(list))
	for _, s := range list {
		names = append(names, s.Name)
	}
	const show = 10
	more := ""
	if len(names) > show {
		more = fmt.Sprintf(" and %d more", len(names)-show)
		names = names[len(names)-show:]
	}
	return fmt.Sprintf("; saved sessions: %s%s (see 'agent sessions')", strings.Join(names, ", "), more)
}

// sayResumed tells the user which session continues and where it stopped.
func sayResumed(w io.Writer, dir string) {
	s := dialogue.DescribeSession(dir)
	if s.Err != nil {
		return // loading it will say what is wrong
	}
	fmt.Fprintf(w, "resuming session %s (saved %s, %d turns; last: %s)\n",
		s.Name, s.SavedAt.Local().Format("2006-01-02 15:04"), s.Turns, lastLine(s))
}
