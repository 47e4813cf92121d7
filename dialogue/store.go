package dialogue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.uber.org/zap"
)

// StoreConfig configures a Store.
type StoreConfig struct {
	// Tokenizer counts prompt tokens for context fitting (engines/llama.Model). It must be
	// safe for concurrent use.
	Tokenizer Tokenizer
	// ContextSize is the model's context in tokens; 0 turns context fitting off.
	ContextSize int
	// ReplyReserve is how many tokens of the context are kept free for the reply.
	ReplyReserve int
	// FitSlack, when positive, makes context fitting drop this many tokens more than
	// needed and then keep the prompt's first utterance while the prompt still fits.
	// The prompt's start then stays the same for several turns, so the LLM engine reuses
	// its KV cache instead of evaluating the whole prompt again after every turn once
	// the context is full. A quarter of the context is a good value; 0 drops only what
	// is needed, every turn.
	FitSlack int
	// Summarizer writes summaries for summary memories (required by them).
	Summarizer Summarizer
	// Input rewrites user text before it is stored (nil: stored as given).
	Input InputTransform
	// Align tunes how interrupted turns are cut back.
	Align AlignOptions
	// AutoSaveDir, when set, is where the session is saved after every change; the change
	// is reported done only once it is on disk.
	AutoSaveDir string
	Logger      *zap.Logger
}

// ErrStoreClosed is returned by the methods of a closed Store.
var ErrStoreClosed = errors.New("dialogue: store closed")

// Store shares a History and a Memory between the LLM module and the dialogue manager.
// One goroutine owns them; the methods send it requests and wait for the answers.
// Summaries are written on goroutines of their own and applied when they arrive; saving
// happens on a saver goroutine. BuildPrompt never waits for either.
type Store struct {
	cfg      StoreConfig
	log      *zap.Logger
	roles    Roles
	requests chan request
	results  chan summaryResult
	done     chan struct{} // closed when the owner goroutine has returned
	cancel   context.CancelFunc
	jobs     sync.WaitGroup // summariser goroutines
	saver    *saver
	close    sync.Once
}

type request struct {
	fn   func(*storeState)
	done chan struct{}
}

// storeState is owned by the Store's goroutine.
type storeState struct {
	ctx         context.Context // the Store's own context, for summariser jobs
	h           *History
	mem         Memory
	job         *SummaryJob        // the job in flight, if any
	cancelJob   context.CancelFunc // cancels it
	blocked     bool               // the last job failed: wait for a change before retrying
	fitFrom     int                // history index of the first utterance the last fitted prompt showed (FitSlack)
	idleWaiters []chan struct{}
}

type summaryResult struct {
	job     SummaryJob
	summary string
	err     error
}

// NewStore starts a Store that owns h and mem (the caller must not use them afterwards).
// The Store stops when ctx is cancelled or Close is called; call Close in any case.
func NewStore(ctx context.Context, h *History, mem Memory, cfg StoreConfig) (*Store, error) {
	if h == nil {
		return nil, errors.New("dialogue: NewStore without a history")
	}
	if mem == nil {
		mem = BufferMemory()
	}
	if cfg.ContextSize < 0 || cfg.ReplyReserve < 0 || cfg.FitSlack < 0 || (cfg.ContextSize > 0 && cfg.ReplyReserve >= cfg.ContextSize) {
		return nil, fmt.Errorf("dialogue: context size %d with reply reserve %d", cfg.ContextSize, cfg.ReplyReserve)
	}
	if cfg.ContextSize > 0 && cfg.Tokenizer == nil {
		return nil, errors.New("dialogue: context fitting needs a tokenizer")
	}
	switch mem.State().Strategy {
	case StrategySummary, StrategySummaryBuffer:
		if cfg.Summarizer == nil {
			return nil, fmt.Errorf("dialogue: %w: the %s memory needs a summarizer", ErrInvalidMemory, mem.State().Strategy)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Store{
		cfg:      cfg,
		log:      log,
		roles:    RolesOf(h.Format()),
		requests: make(chan request),
		results:  make(chan summaryResult, 1), // one job at a time: its result never blocks
		done:     make(chan struct{}),
		cancel:   cancel,
		saver:    newSaver(log),
	}
	st := &storeState{ctx: ctx, h: h, mem: mem, fitFrom: -1}
	go s.saver.run()
	go s.run(ctx, st)
	return s, nil
}

func (s *Store) run(ctx context.Context, st *storeState) {
	defer close(s.done)
	s.maybeSummarise(st)
	for {
		select {
		case req := <-s.requests:
			req.fn(st)
			close(req.done)
		case res := <-s.results:
			st.job, st.cancelJob = nil, nil
			if res.err != nil {
				st.blocked = true
				s.log.Warn("summarising failed; retrying after the next change",
					zap.Int("from", res.job.From), zap.Int("through", res.job.Through), zap.Error(res.err))
			} else {
				st.mem.Apply(res.job, res.summary)
				s.log.Debug("summary applied", zap.Int("covers", res.job.Through))
				if s.cfg.AutoSaveDir != "" {
					// Nobody waits for this save; the saver logs a failure.
					s.saver.submit(s.cfg.AutoSaveDir, st.session(), nil)
				}
			}
			s.maybeSummarise(st)
			s.notifyIdle(st)
		case <-ctx.Done():
			if st.cancelJob != nil {
				st.cancelJob()
			}
			for _, w := range st.idleWaiters {
				close(w)
			}
			return
		}
	}
}

// maybeSummarise starts the memory's next summarising job if one is due and none runs.
func (s *Store) maybeSummarise(st *storeState) {
	if s.cfg.Summarizer == nil || st.job != nil || st.blocked {
		return
	}
	job, due, err := st.mem.Plan(st.h.utterances)
	if err != nil {
		s.log.Warn("planning a summary", zap.Error(err))
		return
	}
	if !due {
		return
	}
	jobCtx, cancel := context.WithCancel(st.ctx)
	st.job, st.cancelJob = &job, cancel
	s.jobs.Add(1)
	go func() {
		defer s.jobs.Done()
		defer cancel()
		summary, err := s.cfg.Summarizer.Summarize(jobCtx, job, s.roles)
		s.results <- summaryResult{job: job, summary: summary, err: err}
	}()
}

func (s *Store) notifyIdle(st *storeState) {
	if st.job != nil {
		return
	}
	for _, w := range st.idleWaiters {
		close(w)
	}
	st.idleWaiters = nil
}

// call runs fn on the owner goroutine and waits until it has run.
func (s *Store) call(ctx context.Context, fn func(*storeState)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := request{fn: fn, done: make(chan struct{})}
	select {
	case s.requests <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return ErrStoreClosed
	}
	// fn is short and never blocks, and it writes variables the caller reads: wait for it
	// whatever ctx says.
	<-req.done
	return nil
}

// changed is called on the owner after every change of the history.
func (s *Store) changed(st *storeState) <-chan error {
	st.blocked = false
	s.maybeSummarise(st)
	if s.cfg.AutoSaveDir == "" {
		return nil
	}
	return s.saver.submit(s.cfg.AutoSaveDir, st.session(), nil)
}

// inserted keeps index-based state right after an utterance was inserted at index i.
func (st *storeState) inserted(i int) {
	st.mem.Inserted(i)
	if i <= st.fitFrom {
		st.fitFrom++
	}
}

func (st *storeState) session() Session {
	return Session{History: st.h.Clone(), Memory: st.mem.State()}
}

func waitSaved(ctx context.Context, saved <-chan error) error {
	if saved == nil {
		return nil
	}
	select {
	case err := <-saved:
		if err != nil {
			return fmt.Errorf("dialogue: the change is stored but was not saved: %w", err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AppendUtterance stores an utterance (user text goes through the Input transform first).
// With auto-save, it returns once the session with the utterance is on disk.
func (s *Store) AppendUtterance(ctx context.Context, u Utterance) error {
	if u.Speaker == User && s.cfg.Input != nil {
		u.Text = s.cfg.Input.TransformInput(u.Text)
	}
	var saved <-chan error
	var err error
	if cerr := s.call(ctx, func(st *storeState) {
		var i int
		if i, err = st.h.Append(u); err != nil {
			return
		}
		if i < st.h.Len()-1 {
			st.inserted(i)
		}
		saved = s.changed(st)
	}); cerr != nil {
		return cerr
	}
	if err != nil {
		return err
	}
	return waitSaved(ctx, saved)
}

// AlignOptions returns how the store cuts an interrupted turn back to what was heard
// (StoreConfig.Align), for whoever shows a turn as the history will keep it (HeardText).
func (s *Store) AlignOptions() AlignOptions { return s.cfg.Align }

// CutInterrupted stores only what the user heard of an interrupted agent turn (see Align
// and History.CutInterrupted) and returns the stored utterance.
func (s *Store) CutInterrupted(ctx context.Context, heard Heard) (Utterance, error) {
	var saved <-chan error
	var u Utterance
	var err error
	if cerr := s.call(ctx, func(st *storeState) {
		before := st.h.Len()
		var i int
		if u, i, err = st.h.CutInterrupted(heard, s.cfg.Align); err != nil {
			return
		}
		if st.h.Len() > before && i < st.h.Len()-1 {
			st.inserted(i)
		}
		saved = s.changed(st)
	}); cerr != nil {
		return Utterance{}, cerr
	}
	if err != nil {
		return Utterance{}, err
	}
	return u, waitSaved(ctx, saved)
}

// Prompt builds the prompt for generating agent turn turnID: the memory's view of the
// history, fitted into the context (ContextSize - ReplyReserve tokens). The owner
// goroutine only copies what the prompt needs; tokenizing runs on the caller's goroutine.
func (s *Store) Prompt(ctx context.Context, turnID int) (FittedPrompt, error) {
	var src promptSource
	prefer := -1
	if err := s.call(ctx, func(st *storeState) {
		opts := ForTurn(turnID)
		view := st.mem.View(st.h.utterances, st.h.selected(opts))
		opts.Summary = view.Summary
		src = st.h.source(opts, view.Keep)
		if s.cfg.FitSlack > 0 && st.fitFrom >= 0 {
			for p, i := range src.indices {
				if i >= st.fitFrom {
					prefer = p
					break
				}
			}
		}
	}); err != nil {
		return FittedPrompt{}, err
	}
	tok := s.cfg.Tokenizer
	if s.cfg.ContextSize == 0 {
		tok = nil
	}
	budget := s.cfg.ContextSize - s.cfg.ReplyReserve
	fp, err := src.fitWith(ctx, tok, budget, max(budget-s.cfg.FitSlack, 0), prefer)
	if err != nil {
		return FittedPrompt{}, fmt.Errorf("dialogue: prompt for turn %d: %w", turnID, err)
	}
	if s.cfg.FitSlack > 0 && fp.start > 0 && fp.start < len(src.indices) {
		from := src.indices[fp.start]
		if err := s.call(ctx, func(st *storeState) { st.fitFrom = max(st.fitFrom, from) }); err != nil {
			return FittedPrompt{}, err
		}
	}
	if fp.Dropped > 0 {
		s.log.Debug("context fitting dropped utterances", zap.Int("turn", turnID),
			zap.Int("dropped", fp.Dropped), zap.Int("tokens", fp.Tokens))
	}
	return fp, nil
}

// ErrNoDraft means the format puts something between the user's text and the end of the
// prompt that depends on the text, so no prefix can be fed ahead.
var ErrNoDraft = errors.New("dialogue: the prompt format gives no stable prefix for the user's turn")

// DraftPrompt builds the prompt agent turn turnID would get if the user's utterance
// userText (user turn turnID-1, through the same Input transform as stored turns) ended
// the user's turn now: the same memory view and context fitting as Prompt, without
// storing anything. It is split where the user's text ends: prefix can be fed to the
// model while the user still speaks (it stays a prefix of the final prompt as long as
// the words hold), and prefix+closing is the whole prompt. It implements the LLM
// module's DraftBuilder.
func (s *Store) DraftPrompt(ctx context.Context, turnID int, userText string) (prefix, closing string, stop []string, err error) {
	if s.cfg.Input != nil {
		userText = s.cfg.Input.TransformInput(userText)
	}
	var src promptSource
	prefer := -1
	var format Format
	if err := s.call(ctx, func(st *storeState) {
		h := st.h.Clone()
		stored := false
		for _, u := range h.utterances {
			stored = stored || (u.Speaker == User && u.TurnID == turnID-1)
		}
		// Once the turn is stored (the user's turn ended before the draft was asked
		// for) the draft is the prompt itself.
		if !stored {
			if _, err := h.Append(Utterance{Speaker: User, TurnID: turnID - 1, Text: userText}); err != nil {
				return
			}
		}
		opts := ForTurn(turnID)
		view := st.mem.View(h.utterances, h.selected(opts))
		opts.Summary = view.Summary
		src = h.source(opts, view.Keep)
		format = h.format
		if s.cfg.FitSlack > 0 && st.fitFrom >= 0 {
			for p, i := range src.indices {
				if i >= st.fitFrom {
					prefer = p
					break
				}
			}
		}
	}); err != nil {
		return "", "", nil, err
	}
	tok := s.cfg.Tokenizer
	if s.cfg.ContextSize == 0 {
		tok = nil
	}
	budget := s.cfg.ContextSize - s.cfg.ReplyReserve
	fp, err := src.fitWith(ctx, tok, budget, max(budget-s.cfg.FitSlack, 0), prefer)
	if err != nil {
		return "", "", nil, fmt.Errorf("dialogue: draft prompt for turn %d: %w", turnID, err)
	}
	text := strings.TrimSpace(userText)
	closing = format.User.Suf + format.Prompt.Suf + format.Cue()
	if text == "" || !strings.HasSuffix(fp.Text, text+closing) {
		return "", "", nil, ErrNoDraft
	}
	return fp.Text[:len(fp.Text)-len(closing)], closing, fp.Stop, nil
}

// BuildPrompt implements the LLM module's prompt builder: the prompt for agent turn
// turnID and its stop patterns.
func (s *Store) BuildPrompt(ctx context.Context, turnID int) (prompt string, stop []string, err error) {
	fp, err := s.Prompt(ctx, turnID)
	if err != nil {
		return "", nil, err
	}
	return fp.Text, fp.Stop, nil
}

// Snapshot returns a copy of the history.
func (s *Store) Snapshot(ctx context.Context) (*History, error) {
	var h *History
	if err := s.call(ctx, func(st *storeState) { h = st.h.Clone() }); err != nil {
		return nil, err
	}
	return h, nil
}

// MemoryState returns the memory's current state.
func (s *Store) MemoryState(ctx context.Context) (MemoryState, error) {
	var m MemoryState
	err := s.call(ctx, func(st *storeState) { m = st.mem.State() })
	return m, err
}

// SetSystemPrompt replaces the system prompt and returns the previous one.
func (s *Store) SetSystemPrompt(ctx context.Context, text string) (previous string, err error) {
	var saved <-chan error
	if err := s.call(ctx, func(st *storeState) {
		previous = st.h.SetSystemPrompt(text)
		saved = s.changed(st)
	}); err != nil {
		return "", err
	}
	return previous, waitSaved(ctx, saved)
}

// ResetSystemPrompt restores the initial system prompt and returns the previous one.
func (s *Store) ResetSystemPrompt(ctx context.Context) (previous string, err error) {
	var saved <-chan error
	if err := s.call(ctx, func(st *storeState) {
		previous = st.h.ResetSystemPrompt()
		saved = s.changed(st)
	}); err != nil {
		return "", err
	}
	return previous, waitSaved(ctx, saved)
}

// Save writes the session to dir, with the KV state when kv is not nil (kv runs on the
// saver goroutine; it must not touch state another goroutine owns).
func (s *Store) Save(ctx context.Context, dir string, kv KVWriter) error {
	var saved <-chan error
	if err := s.call(ctx, func(st *storeState) { saved = s.saver.submit(dir, st.session(), kv) }); err != nil {
		return err
	}
	select {
	case err := <-saved:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitSummaries waits until no summary is being written (for shutdown and tests).
func (s *Store) WaitSummaries(ctx context.Context) error {
	idle := make(chan struct{})
	if err := s.call(ctx, func(st *storeState) {
		if st.job == nil {
			close(idle)
			return
		}
		st.idleWaiters = append(st.idleWaiters, idle)
	}); err != nil {
		return err
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the Store: a summary in progress is cancelled, saves already asked for are
// finished. Methods called afterwards return ErrStoreClosed.
func (s *Store) Close() error {
	s.close.Do(func() {
		s.cancel()
		<-s.done
		s.jobs.Wait()
		s.saver.stop()
	})
	return nil
}

// saver writes sessions on its own goroutine, so that the Store's owner never waits for
// a disk.
type saver struct {
	log  *zap.Logger
	jobs chan saveJob
	done chan struct{}
}

type saveJob struct {
	dir     string
	session Session
	kv      KVWriter
	done    []chan error
}

func newSaver(log *zap.Logger) *saver {
	return &saver{log: log, jobs: make(chan saveJob, 64), done: make(chan struct{})}
}

// submit queues a save; the returned channel receives its result. Only the Store's owner
// goroutine submits, so no submit races stop.
func (sv *saver) submit(dir string, sess Session, kv KVWriter) <-chan error {
	done := make(chan error, 1)
	sv.jobs <- saveJob{dir: dir, session: sess, kv: kv, done: []chan error{done}}
	return done
}

func (sv *saver) stop() {
	close(sv.jobs)
	<-sv.done
}

func (sv *saver) run() {
	defer close(sv.done)
	for job := range sv.jobs {
		batch := []saveJob{job}
	drain:
		for {
			select {
			case j, ok := <-sv.jobs:
				if !ok {
					break drain
				}
				batch = append(batch, j)
			default:
				break drain
			}
		}
		sv.write(batch)
	}
}

// write saves a batch in order, skipping a save without KV state when a later one in the
// batch goes to the same directory: the later one holds everything the earlier one does.
func (sv *saver) write(batch []saveJob) {
	for i := range batch {
		j := batch[i]
		superseded := false
		if j.kv == nil {
			for k := i + 1; k < len(batch); k++ {
				if batch[k].dir == j.dir {
					batch[k].done = append(batch[k].done, j.done...)
					superseded = true
					break
				}
			}
		}
		if superseded {
			continue
		}
		err := SaveSession(j.dir, j.session, j.kv)
		if err != nil {
			sv.log.Error("saving the session", zap.String("dir", j.dir), zap.Error(err))
		}
		for _, d := range j.done {
			d <- err
		}
	}
}
