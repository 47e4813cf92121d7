package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/engines/llama"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/metrics/latency"
	"github.com/parley-voice/parley/modelstore"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/hold"
	"github.com/parley-voice/parley/modules/llm"
	"github.com/parley-voice/parley/modules/llm/llamacpp"
	"github.com/parley-voice/parley/modules/manager"
	"github.com/parley-voice/parley/modules/overlap"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/turnend"
	"github.com/parley-voice/parley/modules/vad"
	"go.uber.org/zap"
)

// Module names in the agent network.
const (
	NameInput   = "input"
	NameVAD     = "vad"
	NameASR     = "asr"
	NameManager = "manager"
	NameLLM     = "llm"
	NameHold    = "hold"
	NameTurnEnd = "turn-end"
	NameOverlap = "overlap"
	NameTTS     = "tts"
	NameSpeaker = "speaker"
	NameConsole = "console"
	// NameEcho is the simulated laptop of a replay (source.Echo), NameAEC the echo
	// canceller (modules/aec).
	NameEcho = "echo"
	NameAEC  = "aec"
)

// IO is what differs between live use, replays and tests: where audio comes from and
// goes to, the clock, and where the record of the session goes.
type IO struct {
	// Input produces 16 kHz mono audio IUs (a microphone or a recording); its name
	// must be NameInput.
	Input iu.Module
	// Speaker plays the agent's audio and reports progress; its name must be NameSpeaker.
	Speaker iu.Module
	// Console, when set, shows the conversation (it reads the recogniser, the manager
	// and the LLM).
	Console iu.Module
	Clock   clock.Clock
	Logger  *zap.Logger
	// Timeline receives every update as JSON lines (optional).
	Timeline io.Writer
	// OnMetrics receives each exchange's latencies (optional).
	OnMetrics func(metrics.Turn)
	// SessionDir, when set, is where the session is saved (overrides the config).
	SessionDir string
	// Observers see every update (tests, tools).
	Observers []iu.Observer
	// Echo, when set, simulates a laptop: the agent's played audio goes back into the
	// input through this echo path (source.Echo, between the input and the canceller).
	// The speaker must report what it plays (speaker.Options.Played).
	Echo *room.Config
	// EchoCancel puts the echo canceller (modules/aec, the engine audio.echo_engine
	// names) on the input's path before the VAD and the recogniser. The speaker must
	// report what it plays (speaker.Options.Played).
	EchoCancel bool
	// EchoDelay is the canceller's delay hint (aec.Config.Delay).
	EchoDelay time.Duration
	// MeasureCPU counts each module's CPU time (iu.WithCPUAccounting; benchmarks).
	MeasureCPU bool
	// Voice, when set, wraps the speech engine the config names (tests: a memo that
	// gives a text the same audio in every replay; see ReplayOptions.Voice).
	Voice func(tts.Engine) tts.Engine
	// Recogniser, when set, wraps the recogniser the config names (the realistic bench:
	// a model of whisper's shape whose words come from the scenario's transcript; see
	// ReplayOptions.Recogniser).
	Recogniser RecogniserWrapper
}

// Agent is a built network with the resources behind it.
type Agent struct {
	Network *iu.Network
	Store   *dialogue.Store
	Manager *manager.Module
	// Latencies times every exchange (an observer of the network).
	Latencies *latency.Observer
	// Origin is the clock time the session's timeline starts at (Outcome.Origin).
	Origin time.Time
	// SessionDir is where the session is saved ("" when it is not).
	SessionDir string
	// AEC is the echo canceller (nil when echo is not cancelled); its Cost says what
	// cancelling cost.
	AEC *aec.Module

	speaker  iu.Module
	vad      *vad.Module
	timeline *iu.Timeline
	closers  []func() error
	log      *zap.Logger
	closed   bool
}

// Engines are the loaded models; Build loads them unless they are given (bench runs
// reuse them across replays).
type Engines struct {
	LLM       llm.Engine
	Tokenizer dialogue.Tokenizer
	// Context is the LLM's context length in tokens (0: unknown, no fitting).
	Context int
	// Summarizer writes summaries for summary memories (nil: built from the config).
	Summarizer dialogue.Summarizer
	closers    []func() error
}

// Close frees the engines.
func (e *Engines) Close() error {
	var errs []error
	for i := len(e.closers) - 1; i >= 0; i-- {
		errs = append(errs, e.closers[i]())
	}
	e.closers = nil
	return errors.Join(errs...)
}

// LoadEngines loads the LLM (and what the memory needs) described by cfg.
func LoadEngines(cfg Config, log *zap.Logger) (*Engines, error) {
	if log == nil {
		log = zap.NewNop()
	}
	for _, note := range cfg.Threads().Capped {
		log.Warn("threads capped: " + note)
	}
	eng, err := FindEngine(KeyLLMEngine, cfg.LLM.Engine)
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}
	return eng.openLLM(cfg, log)
}

// loadLlama loads the llama engine: llama.cpp in this process.
func loadLlama(cfg Config, log *zap.Logger) (*Engines, error) {
	e := &Engines{}
	model, err := llama.LoadModel(cfg.LLM.Model, llama.ModelParams{UseMmap: true})
	if err != nil {
		return nil, fmt.Errorf("llm: %w (fix: %s, or set llm.model)", err, modelstore.Builtin().PullCommand(cfg.LLM.Model))
	}
	e.closers = append(e.closers, model.Close)
	contexts := 1
	if needsSummarizer(cfg) {
		contexts = 2
	}
	if err := llamacpp.CheckContext(model, cfg.LLM.Context, contexts); err != nil {
		e.Close()
		return nil, fmt.Errorf("%w: llm.context: %w", ErrInvalidConfig, err)
	}
	plan := cfg.Threads()
	cp := llama.ContextParams{NCtx: cfg.LLM.Context, Threads: plan.LLM, ThreadsBatch: plan.LLMBatch}
	eng, err := llamacpp.New(model, llamacpp.Config{Context: cp})
	if err != nil {
		e.Close()
		return nil, err
	}
	e.closers = append(e.closers, eng.Close)
	e.LLM = eng
	e.Tokenizer = model
	e.Context = cfg.LLM.Context
	if e.Context == 0 {
		e.Context = min(model.ContextTrainSize(), llamacpp.DefaultMaxContext)
	}
	log.Info("LLM loaded", zap.String("model", cfg.LLM.Model), zap.String("description", model.Description()),
		zap.Int("context", e.Context), zap.Int("threads", plan.LLM), zap.Int("threads_batch", plan.LLMBatch))
	if needsSummarizer(cfg) {
		// Summaries run beside replies, so they get their own context on the same weights.
		sum, err := llamacpp.New(model, llamacpp.Config{Context: cp})
		if err != nil {
			e.Close()
			return nil, err
		}
		e.closers = append(e.closers, sum.Close)
		e.Summarizer = summarizer(sum, cfg)
	}
	return e, nil
}

// loadHTTP opens the http engine: an OpenAI-compatible server.
func loadHTTP(cfg Config, log *zap.Logger) (*Engines, error) {
	e := &Engines{}
	eng, err := llm.NewHTTPEngine(llm.HTTPConfig{URL: cfg.LLM.URL, Model: cfg.LLM.ServerModel, Mode: cfg.LLM.Mode, APIKeyEnv: cfg.LLM.APIKeyEnv,
		Timeout: cfg.LLM.Timeout})
	if err != nil {
		return nil, err
	}
	e.closers = append(e.closers, eng.Close)
	e.LLM = eng
	e.Tokenizer = eng.Tokenizer()
	if e.Context, err = serverContext(eng, cfg.LLM.Context, log); err != nil {
		e.Close()
		return nil, err
	}
	log.Info("LLM server", zap.Stringer("engine", eng), zap.Int("context", e.Context))
	if needsSummarizer(cfg) {
		e.Summarizer = summarizer(eng, cfg)
	}
	return e, nil
}

// serverContext is the context the prompt is fitted to with an LLM server: the server's
// own when it says (llama-server does), or the config's when that is smaller; the
// config's alone when the server does not say (OpenAI-style APIs) or cannot be asked
// now (it may come up later; generation reports it then). A configured context longer
// than the server's is refused: the server would cut the prompts it was promised.
func serverContext(eng *llm.HTTPEngine, configured int, log *zap.Logger) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := eng.ContextSize(ctx)
	switch {
	case err != nil:
		log.Warn("cannot ask the LLM server for its context size; using llm.context", zap.Error(err), zap.Int("context", configured))
		return configured, nil
	case n == 0:
		return configured, nil
	case configured > n:
		return 0, fmt.Errorf("%w: llm.context: %d tokens is more than the server's context (want 1–%d, or 0 for the server's)", ErrInvalidConfig, configured, n)
	case configured > 0:
		return configured, nil
	}
	return n, nil
}

func needsSummarizer(cfg Config) bool {
	s := cfg.Dialogue.Memory.Strategy
	return s == "summary" || s == "summary-buffer"
}

// engineCompleter lets dialogue summaries use an LLM engine.
type engineCompleter struct{ e llm.Engine }

func (c engineCompleter) Complete(ctx context.Context, prompt string, maxTokens int, stop []string) (string, error) {
	res, err := c.e.Generate(ctx, llm.Request{Prompt: prompt, MaxTokens: maxTokens, Stop: stop}, func(string) error { return nil })
	return res.Text, err
}

func summarizer(e llm.Engine, cfg Config) dialogue.Summarizer {
	f, _ := dialogue.LoadFormat(cfg.Dialogue.PromptFormat)
	return dialogue.LLMSummarizer{Completer: engineCompleter{e}, Format: &f, MaxTokens: 120}
}

// NewStore makes the shared history for cfg, resuming a saved session when asked.
func NewStore(ctx context.Context, cfg Config, eng *Engines, sessionDir string, log *zap.Logger) (*dialogue.Store, error) {
	f, err := dialogue.LoadFormat(cfg.Dialogue.PromptFormat)
	if err != nil {
		return nil, err
	}
	if cfg.Dialogue.UserRole != "" || cfg.Dialogue.AgentRole != "" {
		f = f.WithRoles(cfg.Dialogue.UserRole, cfg.Dialogue.AgentRole)
	}
	h := dialogue.NewHistory(f, cfg.Dialogue.SystemPrompt, dialogue.WithInterruptedMark(cfg.Dialogue.InterruptedMark),
		dialogue.WithBackchannels(cfg.Dialogue.ShowBackchannels))
	var mem dialogue.Memory
	if cfg.Session.Resume && sessionDir != "" {
		loaded, err := dialogue.LoadSession(sessionDir)
		if err != nil {
			return nil, fmt.Errorf("resuming %s: %w", sessionDir, err)
		}
		if h, mem, err = loaded.Restore(eng.Tokenizer); err != nil {
			return nil, fmt.Errorf("resuming %s: %w", sessionDir, err)
		}
	}
	if mem == nil {
		switch cfg.Dialogue.Memory.Strategy {
		case "", "buffer":
			mem = dialogue.BufferMemory()
		case "window":
			mem, err = dialogue.WindowMemory(cfg.Dialogue.Memory.Window)
		case "summary":
			mem = dialogue.SummaryMemory()
		case "summary-buffer":
			mem, err = dialogue.SummaryBufferMemory(eng.Tokenizer, cfg.Dialogue.Memory.TokenLimit)
		}
		if err != nil {
			return nil, err
		}
	}
	sc := dialogue.StoreConfig{
		Tokenizer: eng.Tokenizer, ContextSize: eng.Context, ReplyReserve: cfg.Dialogue.ReplyReserve,
		Summarizer: eng.Summarizer, Align: dialogue.AlignOptions{MinWordFraction: cfg.Dialogue.MinWordFraction},
		Input: dialogue.InputChain{dialogue.CollapseSpaces(), dialogue.StripControlStrings(f)}, Logger: log.Named(nameHistory),
	}
	if cfg.Session.AutoSave && sessionDir != "" {
		sc.AutoSaveDir = sessionDir
	}
	return dialogue.NewStore(ctx, h, mem, sc)
}

// SessionPath returns the directory of this run's session ("" when sessions are off).
func SessionPath(cfg Config) (string, error) {
	if cfg.Session.Dir == "" {
		return "", nil
	}
	if cfg.Session.Name != "" {
		return dialogue.SessionPath(cfg.Session.Dir, cfg.Session.Name)
	}
	// A new session must not land in an earlier one's folder (two runs in one second).
	stamp := time.Now().Format("2006-01-02T15-04-05")
	for i := 1; ; i++ {
		name := stamp
		if i > 1 {
			name = fmt.Sprintf("%s-%d", stamp, i)
		}
		p, err := dialogue.SessionPath(cfg.Session.Dir, name)
		if err != nil {
			return "", err
		}
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			return p, nil
		}
	}
}

// Build assembles the agent network around eng (which the caller closes).
func Build(ctx context.Context, cfg Config, eng *Engines, io IO) (*Agent, error) {
	if io.Input == nil || io.Speaker == nil {
		return nil, errors.New("pipeline: an input and a speaker are required")
	}
	if io.Input.Name() != NameInput || io.Speaker.Name() != NameSpeaker {
		return nil, fmt.Errorf("pipeline: the input and the speaker must be named %q and %q", NameInput, NameSpeaker)
	}
	log := io.Logger
	if log == nil {
		log = zap.NewNop()
	}
	clk := io.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	a := &Agent{log: log}
	fail := func(err error) (*Agent, error) {
		a.Close()
		return nil, err
	}
	sessionDir := io.SessionDir
	if sessionDir == "" {
		var err error
		if sessionDir, err = SessionPath(cfg); err != nil {
			return fail(err)
		}
	}
	if sessionDir != "" {
		if err := os.MkdirAll(filepath.Dir(sessionDir), 0o700); err != nil {
			return fail(fmt.Errorf("sessions: %w", err))
		}
	}
	a.SessionDir = sessionDir
	store, err := NewStore(ctx, cfg, eng, sessionDir, log)
	if err != nil {
		return fail(err)
	}
	a.Store = store
	a.closers = append(a.closers, store.Close)

	// What the pipeline makes of the configuration (pipelineSettings says all of it).
	run := pipelineSettings(cfg)
	cfg, asrCfg := run.Config, run.asr
	plan := cfg.Threads()
	cfg.VAD.Threads = plan.VAD
	vadMod, closeVAD, err := openVAD(NameVAD, cfg.VAD)
	if err != nil {
		if _, statErr := os.Stat(cfg.VAD.Model); statErr != nil {
			return fail(fmt.Errorf("vad: %w (fix: %s, or set vad.model)", err, modelstore.Builtin().PullCommand(cfg.VAD.Model)))
		}
		return fail(fmt.Errorf("vad: %w", err))
	}
	a.closers = append(a.closers, closeVAD)
	a.vad = vadMod
	// The end-of-turn policy: the one source of the user's ends of turn.
	policy, waits := turnend.Policy(turnend.Silence{After: vadMod.HeardSilence(cfg.VAD.EndOfTurn)}), turnend.Waits{}
	if run.predictTurnEnd {
		if policy, err = cfg.EndOfTurn.NewPolicy(cfg.VAD.EndOfTurn); err != nil {
			return fail(fmt.Errorf("end_of_turn: %w", err))
		}
		waits = cfg.EndOfTurn.Waits()
	}
	turnEnd := turnend.New(NameTurnEnd, policy, waits)
	asrCfg.Whisper.Threads = plan.Whisper
	asrCfg.Whisper.FinalThreads = plan.WhisperFinal
	asrMod, closeASR, err := openASR(NameASR, asrCfg, io.Recogniser)
	if err != nil {
		return fail(fmt.Errorf("asr: %w", err))
	}
	a.closers = append(a.closers, closeASR)
	ttsMod, closeTTS, err := openTTS(NameTTS, cfg.TTS, io.Voice)
	if err != nil {
		return fail(fmt.Errorf("tts: %w", err))
	}
	a.closers = append(a.closers, closeTTS)
	var overlapMod *overlap.Module
	// The overlap module runs with echo cancellation too: the canceller cuts the user's
	// voice in double talk, and its pieces decode as words, which without the module's
	// confidences and acoustics would stop the agent for most backchannels.
	if cfg.Overlap.Enabled && cfg.TurnTaking.BargeIn.Enabled {
		m, closeOverlap, err := openOverlap(NameOverlap, cfg.Overlap, cfg.TurnTaking.BargeIn, cfg.ASR.Pocketsphinx)
		if err != nil {
			return fail(fmt.Errorf("overlap: %w", err))
		}
		a.closers = append(a.closers, closeOverlap)
		overlapMod = m
	}

	llmCfg := llm.Config{
		MaxTokens: cfg.LLM.MaxTokens,
		Sampling: llm.Sampling{Temperature: cfg.LLM.Temperature, TopK: cfg.LLM.TopK, TopP: cfg.LLM.TopP,
			MinP: cfg.LLM.MinP, RepeatPenalty: cfg.LLM.RepeatPenalty, Seed: cfg.LLM.Seed},
	}
	if words := cfg.Dialogue.RemoveWords; len(words) > 0 {
		llmCfg.NewFilter = func() llm.StreamFilter { return dialogue.NewKeywordFilter(words...) }
	}
	if cfg.LLM.PiecesAsWords {
		llmCfg.NewFilter = func() llm.StreamFilter { return &llm.PieceWords{} }
	}
	llmCfg.Clauses.MaxWords = cfg.LLM.ClauseMaxWords
	llmCfg.Clauses.FirstMaxWords = cfg.LLM.FirstClauseMaxWords
	llmCfg.Prefill = run.prefill
	llmCfg.NoEstimate = !run.predictTurnEnd || !cfg.EndOfTurn.UsesEstimate()
	llmMod := llm.NewModule(NameLLM, eng.LLM, store, llmCfg)
	mgrOpts := manager.Options{Turns: cfg.TurnTaking, Origin: clk.Now()}
	mgr := manager.New(NameManager, store, mgrOpts)
	a.Manager = mgr
	a.Origin = mgrOpts.Origin
	a.speaker = io.Speaker
	_, virtual := clk.(clock.Scheduler)
	a.Latencies = latency.New(latency.Options{Origin: mgrOpts.Origin, OnTurn: io.OnMetrics,
		VirtualClock: virtual, Logger: log.Named(nameMetrics)})

	opts := []iu.Option{iu.WithClock(clk), iu.WithLogger(log), iu.WithObserver(a.Latencies)}
	if io.Timeline != nil {
		a.timeline = iu.NewTimeline(io.Timeline, clk.Now())
		opts = append(opts, iu.WithObserver(a.timeline))
	}
	for _, o := range io.Observers {
		opts = append(opts, iu.WithObserver(o))
	}
	if io.MeasureCPU {
		opts = append(opts, iu.WithCPUAccounting())
	}
	net := iu.NewNetwork(opts...)
	a.Network = net
	mods := []iu.Module{io.Input, vadMod, turnEnd, asrMod, mgr, llmMod, ttsMod, io.Speaker}
	// The microphone's path: the input, through the simulated laptop and the echo
	// canceller when there are, to the VAD and the recogniser.
	mic := NameInput
	micPath := []string{mic} // the modules whose output is the microphone's audio
	var micLinks [][2]string
	if io.Echo != nil {
		echo, err := source.NewEcho(NameEcho, *io.Echo)
		if err != nil {
			return fail(err)
		}
		mods = append(mods, echo)
		micLinks = append(micLinks, [2]string{mic, NameEcho}, [2]string{NameSpeaker, NameEcho})
		mic = NameEcho
		micPath = append(micPath, mic)
	}
	if io.EchoCancel {
		aecMod, closeAEC, err := openAEC(NameAEC, cfg.Audio, aec.Config{Delay: io.EchoDelay})
		if err != nil {
			return fail(fmt.Errorf("aec: %w", err))
		}
		a.closers = append(a.closers, closeAEC)
		a.AEC = aecMod
		mods = append(mods, aecMod)
		micLinks = append(micLinks, [2]string{mic, NameAEC}, [2]string{NameSpeaker, NameAEC})
		mic = NameAEC
		micPath = append(micPath, mic)
	}
	// The speech-producing side: the LLM feeds the TTS directly, or through a module
	// that holds every clause until the reply is complete (the turn-based baseline).
	toTTS, held := NameLLM, !cfg.LLM.StreamClauses
	if held {
		mods = append(mods, hold.New(NameHold))
		toTTS = NameHold
	}
	if overlapMod != nil {
		mods = append(mods, overlapMod)
	}
	if io.Console != nil {
		mods = append(mods, io.Console)
	}
	if err := net.Add(mods...); err != nil {
		return fail(err)
	}
	links := append(micLinks, [][2]string{
		{mic, NameVAD}, {mic, NameASR},
		{NameVAD, NameASR}, {NameVAD, NameManager},
		{NameASR, NameManager},
		{NameManager, NameLLM}, {NameManager, NameTTS}, {NameManager, NameSpeaker},
		{NameLLM, NameManager},
		{toTTS, NameTTS},
		{NameTTS, NameSpeaker}, {NameTTS, NameManager},
		{NameSpeaker, NameManager}, {NameSpeaker, NameVAD},
	}...)
	if held {
		links = append(links, [2]string{NameLLM, NameHold}, [2]string{NameManager, NameHold})
	}
	if overlapMod != nil {
		// The overlap module follows the user's sounds over the agent (echo cancelled, when
		// it is; the VAD says when the agent was audible) for the manager's barge-in
		// decisions, until the manager interrupts the agent.
		links = append(links, [2]string{mic, NameOverlap}, [2]string{NameVAD, NameOverlap},
			[2]string{NameOverlap, NameManager}, [2]string{NameManager, NameOverlap})
	}
	// The end-of-turn policy hears the stream's position, the VAD, the words, the LLM's
	// estimate and the manager's interrupts, and ends the turn for the recogniser and the
	// manager.
	links = append(links,
		[2]string{mic, NameTurnEnd}, [2]string{NameVAD, NameTurnEnd}, [2]string{NameASR, NameTurnEnd},
		[2]string{NameLLM, NameTurnEnd}, [2]string{NameManager, NameTurnEnd}, [2]string{NameTurnEnd, NameASR}, [2]string{NameTurnEnd, NameManager})
	if run.prefill {
		// The LLM reads the words as they come.
		links = append(links, [2]string{NameASR, NameLLM})
	}
	if io.Console != nil {
		// The agent's words come from the manager (its agent-turn IUs), not from the speaker.
		for _, from := range []string{NameASR, NameManager, NameLLM} {
			links = append(links, [2]string{from, NameConsole})
		}
	}
	for _, l := range links {
		if err := net.ConnectNames(l[0], l[1]); err != nil {
			return fail(err)
		}
	}
	// The network sends over one edge of every cycle without blocking (iu.Network.Run);
	// none may carry the microphone's audio, which must slow down with a recogniser that
	// falls behind rather than queue without end.
	for _, e := range net.FeedbackEdges() {
		if slices.Contains(micPath, e[0]) {
			return fail(fmt.Errorf("pipeline: the microphone's edge %s → %s closes a cycle", e[0], e[1]))
		}
	}
	return a, nil
}

// Run runs the network until the session ends (a replay's end, or ctx for live use)
// and closes the timeline.
func (a *Agent) Run(ctx context.Context) error {
	err := a.Network.Run(ctx)
	if a.timeline != nil {
		if terr := a.timeline.Close(); terr != nil && err == nil {
			err = terr
		}
		a.timeline = nil
	}
	return err
}

// Close frees the modules' resources (call it after Run).
func (a *Agent) Close() error {
	if a.closed {
		return nil
	}
	a.closed = true
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
