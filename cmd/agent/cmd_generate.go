package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llamacpp"
	"github.com/parley-voice/parley/pipeline"
	"go.uber.org/zap"
)

func generateCommand() command {
	return command{
		Name:    "generate",
		Summary: "stream a completion from a GGUF model or an OpenAI-compatible server",
		Run:     runGenerate,
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// maxPromptBytes bounds the prompt 'agent generate --prompt -' reads from standard input
// (more than the largest context holds).
const maxPromptBytes = 4 << 20

func runGenerate(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "generate", "[--prompt] TEXT")
	model := fs.String("model", "", "GGUF model file (llama engine), or the model name to request (http engine)")
	prompt := fs.String("prompt", "", "prompt text (or give it as arguments; \"-\" reads standard input)")
	maxTokens := fs.Int("max-tokens", 128, "maximum number of tokens to generate (0: until the model stops or the context is full)")
	engine := fs.String("engine", pipeline.EngineLlama, "llama (in-process llama.cpp) or http (OpenAI-compatible server)")
	url := fs.String("url", "http://127.0.0.1:8080", "server URL for --engine http (root, .../v1 or a full completions URL)")
	mode := fs.String("mode", llm.ModeCompletions, "http endpoint: completions or chat")
	apiKeyEnv := fs.String("api-key-env", "OPENAI_API_KEY", "environment variable holding the server's API key (http engine)")
	timeout := fs.Duration("timeout", 60*time.Second, "http engine: how long to wait for the server to answer or stream on")
	temp := floatVar(fs, "temp", 0, atLeast0, "temperature; 0 is greedy (the default unless a sampling flag is given, which makes it 0.8)")
	topK := fs.Int("top-k", 0, "top-k sampling (0: off)")
	topP := floatVar(fs, "top-p", 0, floatRange{min: 0, max: 1}, "top-p (nucleus) sampling (0 or 1: off)")
	minP := floatVar(fs, "min-p", 0, floatRange{min: 0, max: 1}, "min-p sampling (0: off)")
	repeat := floatVar(fs, "repeat-penalty", 0, atLeast0, "repetition penalty (0 or 1: off)")
	seed := fs.Uint("seed", 0, "sampling seed (the same seed repeats a sampled completion)")
	threads := fs.Int("threads", 0, "CPU threads for the llama engine (0: half the logical CPUs)")
	nctx := fs.Int("ctx", 0, "context length for the llama engine (0: the model's, at most 4096)")
	var stops stringList
	fs.Var(&stops, "stop", "stop string (repeatable); the completion ends before it")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	text := *prompt
	if text == "" && len(rest) > 0 {
		text = strings.Join(rest, " ")
	} else if len(rest) > 0 {
		return usageErrorf("unexpected arguments %q (the prompt was given with --prompt)", rest)
	}
	if text == "-" {
		b, err := regularfile.ReadAll(os.Stdin, maxPromptBytes, "standard input")
		if err != nil {
			return fmt.Errorf("reading the prompt: %w", err)
		}
		text = string(b)
	}
	if text == "" {
		return usageErrorf("no prompt: give --prompt TEXT")
	}
	if *maxTokens < 0 {
		return usageErrorf("--max-tokens must not be negative")
	}
	if *topK < 0 || *nctx < 0 || *threads < 0 {
		return usageErrorf("--top-k, --ctx and --threads must not be negative")
	}
	if *nctx > pipeline.MaxContext {
		return usageErrorf("--ctx %d is not in 0–%d", *nctx, pipeline.MaxContext)
	}
	if n, note := pipeline.CapThreads("--threads", *threads); note != "" {
		a.log.Warn("threads capped: " + note)
		*threads = n
	}

	sampling := llm.Sampling{
		Temperature:   float32(*temp),
		TopK:          *topK,
		TopP:          float32(*topP),
		MinP:          float32(*minP),
		RepeatPenalty: float32(*repeat),
		Seed:          uint32(*seed),
	}
	setFlags := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setFlags[f.Name] = true })
	if !setFlags["temp"] && (setFlags["top-k"] || setFlags["top-p"] || setFlags["min-p"] || setFlags["seed"]) {
		sampling.Temperature = 0.8
	}

	var eng llm.Engine
	switch *engine {
	case pipeline.EngineLlama:
		if *model == "" {
			return usageErrorf("--model FILE.gguf is required with --engine llama")
		}
		e, err := llamacpp.Open(*model, llamacpp.Config{
			Model:   llama.ModelParams{UseMmap: true},
			Context: llama.ContextParams{NCtx: *nctx, Threads: *threads},
		})
		var ce *llamacpp.ContextError
		if errors.As(err, &ce) {
			return usageErrorf("--ctx: %v", ce)
		}
		if err != nil {
			return err
		}
		eng = e
		a.log.Debug("model loaded", zap.String("model", e.Model().Description()), zap.Int("context", e.ContextSize()))
	case pipeline.EngineHTTP:
		e, err := llm.NewHTTPEngine(llm.HTTPConfig{URL: *url, Model: *model, Mode: *mode, APIKeyEnv: *apiKeyEnv, Timeout: *timeout})
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		eng = e
	default:
		return usageErrorf("--engine must be llama or http, not %q", *engine)
	}
	defer eng.Close()

	wrote := false
	res, err := eng.Generate(ctx, llm.Request{Prompt: text, MaxTokens: *maxTokens, Stop: stops, Sampling: sampling}, func(piece string) error {
		wrote = true
		_, err := io.WriteString(a.stdout, piece)
		return err
	})
	if wrote {
		fmt.Fprintln(a.stdout)
	}
	if err != nil && !(res.StopReason == llm.StopCancelled && ctx.Err() != nil) {
		return err
	}
	fmt.Fprintf(a.stderr, "%d tokens (stop: %s), prompt %d tokens (%d cached), first token after %s, %.1f tokens/s\n",
		res.Tokens, res.StopReason, res.PromptTokens, res.CachedTokens, res.TimeToFirstToken.Round(time.Millisecond/10), res.TokensPerSecond)
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(a.stderr, "interrupted")
	}
	return nil
}
