package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
)

func chatCommand() command {
	return command{
		Name:     "chat",
		Summary:  "a text-only conversation with the agent's history, memory and LLM (type /help inside)",
		Run:      runChat,
		LogLevel: "warn",
	}
}

func runChat(ctx context.Context, a *app, args []string) error {
	fi, err := os.Stdin.Stat()
	interactive := err == nil && fi.Mode()&os.ModeCharDevice != 0
	return chatMain(ctx, a, args, os.Stdin, interactive)
}

// chatMain is the chat command reading its lines from in; interactive shows a prompt
// before each line (for a terminal, not for piped input). The conversation is
// pipeline.Chat's; this parses the flags and checks the session they name.
func chatMain(ctx context.Context, a *app, args []string, in io.Reader, interactive bool) error {
	fs := newFlags(a, "chat", "")
	cfgPath := configFlag(fs)
	session := fs.String("session", "", "save the chat as session NAME in the config's session directory (default: a new session named by date and time)")
	resume := fs.Bool("resume", false, "continue the saved session --session NAME")
	think := fs.Bool("think", false, "think before answering (self-ask): the model asks itself follow-up questions and only its final answer is shown and stored")
	var maxTokens int
	fs.IntVar(&maxTokens, "n", -1, "maximum tokens per reply (default: the config's llm.max_tokens)")
	fs.IntVar(&maxTokens, "max-tokens", -1, "same as -n")
	system := fs.String("system", "", "system prompt (default: the config's dialogue.system_prompt, or the resumed session's)")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("chat takes no arguments (got %q); type your lines after it starts", rest)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if (set["n"] || set["max-tokens"]) && maxTokens < 0 {
		return usageErrorf("-n must not be negative")
	}

	cfg, from, err := loadAgentConfig(a, *cfgPath)
	if err != nil {
		return err
	}
	if set["n"] || set["max-tokens"] {
		cfg.LLM.MaxTokens = maxTokens
	}
	if *session != "" {
		cfg.Session.Name = *session
	}
	if *resume {
		cfg.Session.Resume = true
	}
	opts := pipeline.ChatOptions{Think: *think, In: in, Interactive: interactive, Out: a.stdout, Err: a.stderr, Logger: a.log, OnInterrupt: a.onInterrupt}
	if set["system"] {
		opts.SystemPrompt = system
	}
	if cfg.Session.Resume && cfg.Session.Name == "" {
		return usageErrorf("--resume needs --session NAME (the saved session to continue)")
	}
	if cfg.Session.Resume && cfg.Session.Dir == "" {
		return usageErrorf("--resume needs a session directory (session.dir in the config)")
	}
	// A new session without a name gets a free one named by the time.
	if opts.SessionDir, err = pipeline.SessionPath(cfg); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if dir := opts.SessionDir; dir != "" {
		_, statErr := os.Stat(filepath.Join(dir, dialogue.SessionFile))
		switch {
		case cfg.Session.Resume && errors.Is(statErr, os.ErrNotExist):
			return fmt.Errorf("no saved session %q in %s (start it without --resume)", cfg.Session.Name, cfg.Session.Dir)
		case !cfg.Session.Resume && statErr == nil:
			// Starting afresh would overwrite the saved conversation at the first save.
			return usageErrorf("session %q already exists in %s: add --resume to continue it, or choose another name", cfg.Session.Name, cfg.Session.Dir)
		}
	}
	a.log.Info("chat", zap.String("config", from), zap.String("session", opts.SessionDir), zap.Bool("resume", cfg.Session.Resume), zap.Bool("think", *think))
	return pipeline.Chat(ctx, cfg, opts)
}
