package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/parley-voice/parley/chat"
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
// chat.Run's; this parses the flags and checks the session they name.
func chatMain(ctx context.Context, a *app, args []string, in io.Reader, interactive bool) error {
	fs := newFlags(a, "chat", "")
	cfgPath := configFlag(fs)
	sf := addSessionFlags(fs)
	think := fs.Bool("think", false, "think before answering (self-ask): the model asks itself follow-up questions and only its final answer is shown and stored")
	maxTokens := fs.Int("max-tokens", 0, "maximum tokens per reply (default: the config's llm.max_tokens)")
	system := fs.String("system", "", "system prompt (default: the config's dialogue.system_prompt, or the resumed session's)")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["max-tokens"] && *maxTokens < 0 {
		return usageErrorf("--max-tokens must not be negative")
	}

	cfg, from, err := loadAgentConfig(a, *cfgPath)
	if err != nil {
		return err
	}
	if set["max-tokens"] {
		cfg.LLM.MaxTokens = *maxTokens
	}
	opts := chat.Options{Think: *think, In: in, Interactive: interactive, Out: a.stdout, Err: a.stderr, Logger: a.log, OnInterrupt: a.onInterrupt}
	if set["system"] {
		opts.SystemPrompt = system
	}
	if opts.SessionDir, rest, err = sf.apply(&cfg, rest); err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("chat takes no arguments (got %q); type your lines after it starts", rest)
	}
	if cfg.Session.Resume {
		sayResumed(a.stderr, opts.SessionDir)
	}
	a.log.Info("chat", zap.String("config", from), zap.String("session", opts.SessionDir), zap.Bool("resume", cfg.Session.Resume), zap.Bool("think", *think))
	return chat.Run(ctx, cfg, opts)
}
