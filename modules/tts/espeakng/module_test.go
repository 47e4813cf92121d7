package espeakng_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/engines/espeak"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/tts/espeakng"
	"github.com/parley-voice/parley/modules/tts/normalize"
)

// The TTS module speaking with the real espeak-ng engine.

// testClause stands in for the LLM module's clause payload.
type testClause struct {
	turn, clause int
	text         string
	last         bool
}

func (testClause) Kind() string { return "clause" }
func (c testClause) Summary() string {
	return fmt.Sprintf("turn %d clause %d %q", c.turn, c.clause, c.text)
}
func (c testClause) ClauseText() (int, int, string, bool) { return c.turn, c.clause, c.text, c.last }

// openEngine opens the real espeak-ng engine for one test (one per process at a time, so
// the tests of this package do not run in parallel).
func openEngine(t testing.TB, cfg tts.Config) *espeakng.Engine {
	t.Helper()
	e, err := espeakng.New(cfg)
	if err != nil {
		if _, data := espeak.Version(); data == "" {
			testenv.Missing(t, "espeak-ng data", testenv.EnvFix)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// synthesis is what the engine produced for one text.
type synthesis struct {
	text    string
	samples []float32
	marks   []tts.Mark
	pieces  int
}

// spyEngine is the real engine with a record of what it produced, and an optional gate
// that holds a synthesis after the piece in which its second word starts (by then the
// module can emit the first word) until the gate opens or the synthesis is stopped. It is used by the module's worker goroutine; the test reads it after the
// network has finished.
type spyEngine struct {
	tts.Engine
	gateText string        // synthesis of text containing this waits at the gate
	gate     chan struct{} // closed to let it go on

	mu   sync.Mutex
	runs []*synthesis
}

func (s *spyEngine) Synthesize(ctx context.Context, text string, emit func(tts.Piece) error) error {
	run := &synthesis{text: text}
	s.mu.Lock()
	s.runs = append(s.runs, run)
	s.mu.Unlock()
	return s.Engine.Synthesize(ctx, text, func(p tts.Piece) error {
		run.samples = append(run.samples, p.Samples...)
		run.marks = append(run.marks, p.Marks...)
		run.pieces++
		if err := emit(p); err != nil {
			return err
		}
		if len(run.marks) >= 2 && len(run.marks)-len(p.Marks) < 2 && s.gate != nil && s.gateText != "" && strings.Contains(text, s.gateText) {
			select {
			case <-s.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

func (s *spyEngine) run(t *testing.T, spoken string) *synthesis {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.runs {
		if r.text == spoken {
			return r
		}
	}
	t.Fatalf("the engine never synthesised %q", spoken)
	return nil
}

// received is one chunk as the collector saw it.
type received struct {
	id    iu.ID
	chunk tts.Chunk
	at    time.Time
}

// harness runs feeder → tts → collector (and tts → feeder, so the feeder can react to
// speech) on a virtual clock.
type harness struct {
	t      *testing.T
	engine *spyEngine
	cfg    tts.Config
	got    []received
	// final is each chunk's last update: commit or revoke (absent: still open).
	final map[iu.ID]iu.UpdateType
}

func newHarness(t *testing.T, cfg tts.Config) *harness {
	return &harness{t: t, cfg: cfg, engine: &spyEngine{Engine: openEngine(t, cfg)}, final: map[iu.ID]iu.UpdateType{}}
}

func (h *harness) run(feed func(ctx context.Context, p *iu.Ports) error) {
	h.t.Helper()
	vc := clock.NewVirtual(time.Unix(1000, 0))
	defer vc.Close()
	net := iu.NewNetwork(iu.WithClock(vc))
	m, err := tts.New("tts", h.cfg, h.engine)
	if err != nil {
		h.t.Fatal(err)
	}
	feeder := iu.ModuleFunc{ModuleName: "feeder", Fn: feed}
	collector := iu.ModuleFunc{ModuleName: "collector", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case iu.EventInputDone:
				return nil
			case iu.EventMessage:
				for _, up := range ev.Message.Updates {
					c, ok := up.IU.Payload.(tts.Chunk)
					if !ok {
						return fmt.Errorf("collector got %T", up.IU.Payload)
					}
					if up.Type == iu.Add {
						h.got = append(h.got, received{id: up.IU.ID, chunk: c, at: p.Now()})
					}
					if up.Type == iu.Commit || up.Type == iu.Revoke {
						h.final[up.IU.ID] = up.Type
					}
					if len(up.IU.GroundedIn) != 1 {
						return fmt.Errorf("chunk %s grounded in %v", up.IU.ID, up.IU.GroundedIn)
					}
				}
			}
		}
	}}
	for _, err := range []error{
		net.Add(feeder, m, collector),
		net.Connect(feeder, m), net.Connect(m, collector), net.Connect(m, feeder),
	} {
		if err != nil {
			h.t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		h.t.Fatal(err)
	}
	if ctx.Err() != nil {
		h.t.Fatal("network did not finish")
	}
}

// chunksOf returns the chunks of one clause in arrival order.
func (h *harness) chunksOf(turn, clause int) []tts.Chunk {
	var out []tts.Chunk
	for _, r := range h.got {
		if r.chunk.TurnID == turn && r.chunk.ClauseID == clause {
			out = append(out, r.chunk)
		}
	}
	return out
}

// commit sends ADD+COMMIT of payloads, one IU each, in one batch.
func commit(ctx context.Context, p *iu.Ports, payloads ...iu.Payload) error {
	var ups []iu.Update
	for _, pl := range payloads {
		u := p.NewIU(pl)
		ups = append(ups, iu.AddOf(u), iu.CommitOf(u))
	}
	return p.Send(ctx, ups...)
}

// waitForSpeech waits until the TTS sends a chunk matching want, or the virtual
// deadline passes; on a virtual clock the deadline passes only when the whole network
// is idle, that is, when the TTS is not going to send it.
func waitForSpeech(ctx context.Context, p *iu.Ports, want func(tts.Chunk) bool) error {
	deadline := p.Now().Add(time.Minute)
	for {
		ev, err := p.Next(ctx, deadline)
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventDeadline:
			return errors.New("no such speech chunk while the network went idle")
		case iu.EventInputDone:
			return errors.New("the TTS finished without such a speech chunk")
		case iu.EventMessage:
			for _, up := range ev.Message.Updates {
				if c, ok := up.IU.Payload.(tts.Chunk); ok && up.Type == iu.Add && want(c) {
					return nil
				}
			}
		}
	}
}

// checkClause asserts the chunk stream of one clause against the engine's own record:
// the audio is exactly the engine's, chunks are short, contiguous and numbered, a new
// word starts exactly at the engine's word start, and pauses are silent. It returns the
// words in order.
func checkClause(t *testing.T, cfg tts.Config, chunks []tts.Chunk, run *synthesis, last bool) []string {
	t.Helper()
	if len(chunks) == 0 {
		t.Fatal("no chunks")
	}
	text := chunks[0].ClauseText
	norm := normalize.Normalize(text)
	maxLen := int(audio.DurationToSamples(cfg.ChunkDuration, chunks[0].Audio.Rate))
	var pcm []float32
	var words []string
	prevWord := -1
	wordStarts := map[int64]bool{}
	for _, m := range run.marks {
		wordStarts[m.Sample] = true
	}
	for i, c := range chunks {
		if c.Seq != i || c.FirstOfClause != (i == 0) || c.LastOfClause != (i == len(chunks)-1) {
			t.Fatalf("chunk %d: seq %d first %v last %v", i, c.Seq, c.FirstOfClause, c.LastOfClause)
		}
		if c.LastOfTurn != (last && i == len(chunks)-1) {
			t.Fatalf("chunk %d: LastOfTurn %v", i, c.LastOfTurn)
		}
		if n := c.Audio.Len(); n == 0 || n > maxLen || c.Audio.Duration() > tts.MaxChunkDuration {
			t.Fatalf("chunk %d: %d samples (%v), limit %d", i, n, c.Audio.Duration(), maxLen)
		}
		if c.Audio.Channels != 1 || c.Audio.Rate != 22050 || c.Audio.Start != int64(len(pcm)) {
			t.Fatalf("chunk %d: frame %s after %d samples", i, c.Audio.Summary(), len(pcm))
		}
		pcm = append(pcm, c.Audio.Samples...)
		start, end := c.Audio.Start, c.Audio.End()
		for s := range wordStarts {
			if s > start && s < end {
				// Allowed only when the mark continues the word the chunk speaks.
				for _, m := range run.marks {
					if m.Sample == s {
						if a, _ := norm.Span(m.Start, m.End); a < c.CharStart || (c.WordIndex >= 0 && a >= c.CharEnd) {
							t.Fatalf("chunk %d (%d..%d, word %q) crosses the start of %q at %d",
								i, start, end, c.Word(), norm.Spoken[m.Start:m.End], s)
						}
					}
				}
			}
		}
		switch {
		case c.WordIndex == -1:
			for _, x := range c.Audio.Samples {
				if x != 0 && prevWord >= 0 {
					t.Fatalf("chunk %d: pause after word %d holds sound", i, prevWord)
				}
			}
			if c.CharStart != c.CharEnd {
				t.Fatalf("chunk %d: silence with span %d..%d", i, c.CharStart, c.CharEnd)
			}
		case c.WordIndex == prevWord:
		case c.WordIndex == prevWord+1 || (prevWord == -1 && c.WordIndex == len(words)):
			if c.WordIndex != len(words) {
				t.Fatalf("chunk %d: word index %d after %d words", i, c.WordIndex, len(words))
			}
			// A new word starts exactly where the engine said a word starts.
			if !wordStarts[start] {
				t.Fatalf("chunk %d starts word %q at sample %d, where the engine reported no word", i, c.Word(), start)
			}
			words = append(words, c.Word())
			prevWord = c.WordIndex
		default:
			t.Fatalf("chunk %d: word index %d after %d", i, c.WordIndex, prevWord)
		}
		if c.WordIndex >= 0 {
			prevWord = c.WordIndex
		}
	}
	if len(pcm) != len(run.samples) || !slices.Equal(pcm, run.samples) {
		t.Fatalf("chunk audio (%d samples) differs from the engine's (%d samples)", len(pcm), len(run.samples))
	}
	// Each word's chunks say where they lie in the word, and the word's length (exact
	// for a word the hold covers); HeardAt turns that into the share of the word heard.
	total := map[int]int{}
	for _, c := range chunks {
		if c.WordIndex >= 0 {
			total[c.WordIndex] += c.Audio.Len()
		}
	}
	hold := int(audio.DurationToSamples(cfg.WordHold, chunks[0].Audio.Rate))
	before := map[int]int{}
	for i, c := range chunks {
		h := c.HeardAt(c.Audio.Len())
		if h.TurnID != c.TurnID || h.ClauseID != c.ClauseID || h.Clause != c.ClauseText {
			t.Fatalf("chunk %d: heard text %+v", i, h)
		}
		if c.WordIndex < 0 {
			if c.WordOffset != 0 || c.WordLength != 0 || h.WordStart != c.CharEnd || h.WordEnd != c.CharEnd || h.WordFraction != 0 {
				t.Fatalf("chunk %d: silence with word offset %d, length %d, heard %+v", i, c.WordOffset, c.WordLength, h)
			}
			continue
		}
		w := c.WordIndex
		if c.WordOffset != before[w] || c.WordLength < before[w]+c.Audio.Len() || c.WordLength > total[w] ||
			(total[w] <= hold && c.WordLength != total[w]) {
			t.Fatalf("chunk %d of word %d: offset %d, length %d; %d samples before it, %d in all", i, w, c.WordOffset, c.WordLength, before[w], total[w])
		}
		before[w] += c.Audio.Len()
		if want := float64(before[w]) / float64(c.WordLength); h.WordStart != c.CharStart || h.WordEnd != c.CharEnd || h.WordFraction != want {
			t.Fatalf("chunk %d heard to its end: %+v, want the word %d..%d and fraction %g", i, h, c.CharStart, c.CharEnd, want)
		}
	}
	return words
}

func TestSpeaksCommittedClauses(t *testing.T) {
	cfg := tts.DefaultConfig()
	h := newHarness(t, cfg)
	clauses := []struct {
		c     testClause
		words []string
	}{
		{testClause{1, 0, "Héllo café, it costs $3.50.", false}, []string{"Héllo", "café", "it", "costs", "$3.50"}},
		{testClause{1, 1, "The naïve façade of the house is 3.5 metres tall — isn't it?", false},
			[]string{"The", "naïve", "façade", "of the", "house", "is", "3.5", "metres", "tall", "isn't", "it"}},
		{testClause{1, 2, "Zürich's **Ørsted** offers 12% off, e.g. on 1,000 items!", true},
			[]string{"Zürich's", "Ørsted", "offers", "12%", "off", "e.g.", "on", "1,000", "items"}},
	}
	h.run(func(ctx context.Context, p *iu.Ports) error {
		for _, cl := range clauses {
			// The LLM's pattern: ADD a growing clause, UPDATE it, COMMIT when complete.
			half := cl.c
			half.text = cl.c.text[:len(cl.c.text)/2]
			u := p.NewIU(half)
			if err := p.Send(ctx, iu.AddOf(u)); err != nil {
				return err
			}
			if err := p.Send(ctx, iu.UpdateOf(u, cl.c)); err != nil {
				return err
			}
			u.Payload = cl.c
			if err := p.Send(ctx, iu.CommitOf(u)); err != nil {
				return err
			}
		}
		return nil
	})
	for _, cl := range clauses {
		chunks := h.chunksOf(cl.c.turn, cl.c.clause)
		run := h.engine.run(t, normalize.Normalize(cl.c.text).Spoken)
		words := checkClause(t, cfg, chunks, run, cl.c.last)
		if !slices.Equal(words, cl.words) {
			t.Errorf("clause %d: words %q, want %q", cl.c.clause, words, cl.words)
		}
		pauses := 0
		for _, c := range chunks {
			if c.WordIndex == -1 {
				pauses++
			}
		}
		if pauses == 0 {
			t.Errorf("clause %d: no pause chunks, though it has punctuation", cl.c.clause)
		}
		if run.pieces < 2 {
			t.Errorf("clause %d: engine delivered %d pieces; expected streaming", cl.c.clause, run.pieces)
		}
	}
	// Clauses are spoken in the order they were committed, never interleaved.
	var order []int
	for _, r := range h.got {
		if len(order) == 0 || order[len(order)-1] != r.chunk.ClauseID {
			order = append(order, r.chunk.ClauseID)
		}
	}
	if !slices.Equal(order, []int{0, 1, 2}) {
		t.Fatalf("clause order %v", order)
	}
}

// TestFirstAudioBeforeNextClause: the first audio of clause 1 is sent while its own
// synthesis is still running (held at the gate) and before clause 2 even exists.
func TestFirstAudioBeforeNextClause(t *testing.T) {
	cfg := tts.DefaultConfig()
	h := newHarness(t, cfg)
	first := testClause{7, 0, "This first clause is long enough to need many pieces of audio from the engine,", false}
	second := testClause{7, 1, "and this one comes later.", true}
	h.engine.gateText = "first clause"
	h.engine.gate = make(chan struct{})
	var secondSent time.Time
	h.run(func(ctx context.Context, p *iu.Ports) error {
		if err := commit(ctx, p, first); err != nil {
			return err
		}
		if err := waitForSpeech(ctx, p, func(c tts.Chunk) bool { return c.ClauseID == 0 }); err != nil {
			return fmt.Errorf("first clause: %w", err)
		}
		close(h.engine.gate) // only now may the first clause's synthesis go on
		secondSent = p.Now()
		return commit(ctx, p, second)
	})
	c0, c1 := h.chunksOf(7, 0), h.chunksOf(7, 1)
	checkClause(t, cfg, c0, h.engine.run(t, first.text), false)
	checkClause(t, cfg, c1, h.engine.run(t, second.text), true)
	if h.got[0].chunk.ClauseID != 0 || h.got[0].at.After(secondSent) {
		t.Fatalf("first chunk %s at %v, second clause sent at %v", h.got[0].chunk.Summary(), h.got[0].at, secondSent)
	}
}

func TestRevokedClauseIsDropped(t *testing.T) {
	cfg := tts.DefaultConfig()
	h := newHarness(t, cfg)
	a := testClause{2, 0, "Kept clause one.", false}
	b := testClause{2, 1, "Revoked before it was finished", false}
	c := testClause{2, 2, "Kept clause two.", true}
	h.run(func(ctx context.Context, p *iu.Ports) error {
		ua, ub := p.NewIU(a), p.NewIU(b)
		if err := p.Send(ctx, iu.AddOf(ua), iu.AddOf(ub)); err != nil {
			return err
		}
		if err := p.Send(ctx, iu.UpdateOf(ub, b), iu.CommitOf(ua)); err != nil {
			return err
		}
		if err := p.Send(ctx, iu.RevokeOf(ub)); err != nil {
			return err
		}
		return commit(ctx, p, c)
	})
	if got := h.chunksOf(2, 1); len(got) != 0 {
		t.Fatalf("revoked clause spoken: %d chunks", len(got))
	}
	checkClause(t, cfg, h.chunksOf(2, 0), h.engine.run(t, a.text), false)
	checkClause(t, cfg, h.chunksOf(2, 2), h.engine.run(t, c.text), true)
}

func TestInterrupt(t *testing.T) {
	cfg := tts.DefaultConfig()
	h := newHarness(t, cfg)
	long := testClause{1, 0, "A long first clause that the user interrupts while it is still being synthesised,", false}
	queued := []testClause{{1, 1, "a queued clause that is never spoken,", false}, {1, 2, "nor this one.", true}}
	late := testClause{1, 3, "A clause of the interrupted turn that arrives late.", true}
	other := testClause{3, 0, "Another turn is spoken.", true}
	h.engine.gateText = "long first clause"
	h.engine.gate = make(chan struct{}) // never opened: only the interrupt ends that synthesis
	h.run(func(ctx context.Context, p *iu.Ports) error {
		if err := commit(ctx, p, long, queued[0], queued[1]); err != nil {
			return err
		}
		if err := waitForSpeech(ctx, p, func(c tts.Chunk) bool { return c.TurnID == 1 }); err != nil {
			return err
		}
		if err := commit(ctx, p,
			control.Command{Action: control.Pause, TurnID: 1},     // the speaker's business
			control.Command{Action: control.Interrupt, TurnID: 9}, // another turn: no effect
			control.Command{Action: control.Interrupt, TurnID: 1, Reason: "barge-in"}); err != nil {
			return err
		}
		return commit(ctx, p, late, other)
	})
	c0 := h.chunksOf(1, 0)
	if len(c0) == 0 {
		t.Fatal("nothing of the interrupted clause was spoken before the interrupt")
	}
	run := h.engine.run(t, normalize.Normalize(long.text).Spoken)
	for _, c := range c0 {
		if c.LastOfClause || c.Audio.End() > int64(len(run.samples)) {
			t.Fatalf("interrupted clause went on: %s", c.Summary())
		}
	}
	for _, cl := range append(queued, late) {
		if n := len(h.chunksOf(cl.turn, cl.clause)); n != 0 {
			t.Errorf("clause %d of the interrupted turn: %d chunks", cl.clause, n)
		}
	}
	checkClause(t, cfg, h.chunksOf(3, 0), h.engine.run(t, other.text), true)
}

func TestTextAndEmptyClauses(t *testing.T) {
	cfg := tts.DefaultConfig()
	cfg.ChunkDuration = 40 * time.Millisecond
	h := newHarness(t, cfg)
	say := tts.Text{TurnID: 0, Text: "Are you still there?"}
	empty := testClause{4, 0, "** 🎉", true}
	h.run(func(ctx context.Context, p *iu.Ports) error {
		return commit(ctx, p, say, empty)
	})
	words := checkClause(t, cfg, h.chunksOf(0, 0), h.engine.run(t, say.Text), true)
	if !slices.Equal(words, []string{"Are", "you", "still", "there"}) {
		t.Fatalf("words %q", words)
	}
	e := h.chunksOf(4, 0)
	if len(e) != 1 || e[0].Audio.Len() != 0 || !e[0].FirstOfClause || !e[0].LastOfClause || !e[0].LastOfTurn || e[0].WordIndex != -1 {
		t.Fatalf("clause with nothing to say: %+v", e)
	}
}

// TestDefaultsAreEspeaks: tts.DefaultConfig writes espeak-ng's voice defaults out (so
// that package tts does not link the library); they must stay the library's.
func TestDefaultsAreEspeaks(t *testing.T) {
	c := tts.DefaultConfig()
	if c.Voice != espeak.DefaultVoice || c.Rate != espeak.DefaultRate || c.Pitch != espeak.DefaultPitch || c.Volume != espeak.DefaultVolume {
		t.Errorf("tts.DefaultConfig voice %q rate %d pitch %d volume %d; espeak-ng's are %q %d %d %d",
			c.Voice, c.Rate, c.Pitch, c.Volume, espeak.DefaultVoice, espeak.DefaultRate, espeak.DefaultPitch, espeak.DefaultVolume)
	}
}

// preparedClause is a clause of a turn prepared ahead (llm.Clause with Prepared set).
type preparedClause struct{ testClause }

func (preparedClause) IsPrepared() bool { return true }

// TestPreparedClauses: a prepared clause is synthesised before its commit, as tentative
// chunks that its commit commits and its revoke revokes, all of them.
func TestPreparedClauses(t *testing.T) {
	cfg := tts.DefaultConfig()
	h := newHarness(t, cfg)
	kept := preparedClause{testClause{3, 0, "Here is what I prepared.", false}}
	dropped := preparedClause{testClause{5, 0, "Nobody will hear this one.", true}}
	next := testClause{3, 1, "And this follows it.", true}
	h.run(func(ctx context.Context, p *iu.Ports) error {
		uk, ud := p.NewIU(kept), p.NewIU(dropped)
		if err := p.Send(ctx, iu.AddOf(uk), iu.AddOf(ud)); err != nil {
			return err
		}
		// Wait until both are spoken, tentatively.
		for done := 0; done < 2; {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			if ev.Kind != iu.EventMessage {
				continue
			}
			for _, up := range ev.Message.Updates {
				if c, ok := up.IU.Payload.(tts.Chunk); ok {
					if !c.Tentative || up.Type != iu.Add {
						return fmt.Errorf("chunk %s of a prepared clause: %v, tentative %v", up.IU.ID, up.Type, c.Tentative)
					}
					if c.LastOfClause {
						done++
					}
				}
			}
		}
		if err := p.Send(ctx, iu.CommitOf(uk), iu.RevokeOf(ud)); err != nil {
			return err
		}
		return commit(ctx, p, next)
	})
	for _, r := range h.got {
		want := iu.Commit
		if r.chunk.TurnID == 5 {
			want = iu.Revoke
		}
		if got := h.final[r.id]; got != want {
			t.Fatalf("chunk %s (turn %d, tentative %v) ended %v, want %v", r.id, r.chunk.TurnID, r.chunk.Tentative, got, want)
		}
	}
	checkClause(t, cfg, h.chunksOf(3, 0), h.engine.run(t, kept.text), false)
	checkClause(t, cfg, h.chunksOf(3, 1), h.engine.run(t, next.text), true)
	if len(h.chunksOf(5, 0)) == 0 {
		t.Fatal("the dropped clause was not synthesised ahead")
	}
}
