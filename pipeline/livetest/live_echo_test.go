package livetest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/pulsetest"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/aec"
	"github.com/parley-voice/parley/modules/console"
	"github.com/parley-voice/parley/modules/manager"
	"github.com/parley-voice/parley/modules/speaker"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/pipeline/internal/pipetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// liveLaptop watches a live session for the test's driver: when the microphone
// delivers, what the speaker plays, the agent's finished turns, and what made the agent
// stop (the VAD's candidates, mapped to wall-clock time through the microphone's
// capture times, and the manager's pauses and interrupts).
type liveLaptop struct {
	listening chan struct{}
	once      sync.Once
	turns     chan manager.AgentTurn
	playing   chan time.Duration // Pos of the speaker's playing reports

	mu        sync.Mutex
	audio     map[string][]float32 // the microphone's and the canceller's audio, for a failing test to write out
	micStart  int64                // stream position and capture time of a microphone frame
	micTime   time.Time
	candidate time.Time // when the last speech candidate began, on the wall clock
	stops     []stop    // the manager's ducks, pauses and interrupts
	unducks   []stop    // the manager's restores of the agent's volume
	statuses  []string
	clocks    []string // the microphone's capture and the speaker's hearing times, for a failing test
}

type stop struct {
	command control.Command
	cause   time.Time // the speech candidate's onset (zero: none)
	at      time.Time // when the manager sent the command
}

func newLiveLaptop() *liveLaptop {
	return &liveLaptop{listening: make(chan struct{}), turns: make(chan manager.AgentTurn, 64), playing: make(chan time.Duration, 1),
		audio: map[string][]float32{}}
}

func (l *liveLaptop) Observe(at time.Time, m iu.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, up := range m.Updates {
		if pl, ok := up.IU.Payload.(manager.AgentTurn); ok && up.Type == iu.Commit {
			// An agent turn is over.
			select {
			case l.turns <- pl:
			default:
			}
		}
		if up.Type != iu.Add {
			continue
		}
		switch pl := up.IU.Payload.(type) {
		case audio.Frame:
			if m.From == pipeline.NameInput && !pl.Captured.IsZero() {
				l.clocks = append(l.clocks, fmt.Sprintf("mic %d %d", pl.Start, pl.Captured.UnixNano()))
			}
			if a := l.audio[m.From]; pl.Start >= int64(len(a)) {
				l.audio[m.From] = append(append(a, make([]float32, pl.Start-int64(len(a)))...), pl.Samples...)
			}
			if m.From == pipeline.NameInput && !pl.Captured.IsZero() && l.micTime.IsZero() {
				l.micStart, l.micTime = pl.Start, pl.Captured
				l.once.Do(func() { close(l.listening) })
			}
		case vad.Candidate:
			l.candidate = l.micTime.Add(pl.Start - audio.SamplesToDuration(l.micStart, audio.PipelineRate))
		case control.Command:
			switch pl.Action {
			case control.Duck, control.Pause, control.Interrupt:
				l.stops = append(l.stops, stop{command: pl, cause: l.candidate, at: at})
			case control.Unduck:
				l.unducks = append(l.unducks, stop{command: pl, at: at})
			}
		case aec.Status:
			l.statuses = append(l.statuses, pl.Summary())
		case speaker.Played:
			l.clocks = append(l.clocks, fmt.Sprintf("spk %d %d", pl.Audio.Start, pl.Heard.UnixNano()))
			// The played audio where its timing puts it on the microphone's timeline.
			if !l.micTime.IsZero() {
				at := l.micStart + audio.DurationToSamples(pl.Heard.Sub(l.micTime), audio.PipelineRate)
				if a := l.audio["played"]; at >= 0 && at >= int64(len(a)) {
					l.audio["played"] = append(append(a, make([]float32, at-int64(len(a)))...), pl.Audio.Samples...)
				}
			}
		case speaker.Progress:
			if pl.State == speaker.Playing {
				select { // keep only the latest
				case <-l.playing:
				default:
				}
				l.playing <- pl.Pos
			}
		}
	}
}

// dump logs the canceller's status lines and, when the test failed, writes the audio
// the session heard and the devices' clocks.
func (l *liveLaptop) dump(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("canceller:\n%s", strings.Join(l.statuses, "\n"))
	if !t.Failed() {
		return
	}
	// One set of files per subtest, so that the next one does not overwrite them.
	prefix := filepath.Join(os.TempDir(), "parley-"+strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())+"-")
	os.WriteFile(prefix+"clocks.txt", []byte(strings.Join(l.clocks, "\n")), 0o644)
	for from, a := range l.audio {
		path := prefix + from + ".wav"
		if err := audio.WriteWAVFile(path, audio.Frame{Samples: a, Rate: audio.PipelineRate, Channels: 1}, 16); err == nil {
			t.Logf("%s's audio written to %s", from, path)
		}
	}
}

// flinch is how long a duck for the agent's own voice may last before it counts as
// the agent stopping for itself: issue 14's bound for a sound that must not stop the
// agent (a cough, a "yeah": never silent, full volume back within 300 ms). A residue
// of echo that the canceller lets through for a moment (the loopback glitched on a
// loaded machine, and AEC3 adapts anew) is held to the same standard.
const flinch = 300 * time.Millisecond

// selfStops returns the stops whose speech began while none of the user's recordings
// played (spans on the wall clock, from paplay's start to the end of the recording's
// way to the microphone), and apart from them the flinches: ducks of that kind
// released within flinch.
func (l *liveLaptop) selfStops(spans [][2]time.Time) (stops, flinches []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.stops {
		// The user's if its speech began during a recording and the manager yielded
		// while it played or soon after (the ducks of a sound that goes on come later
		// than its onset).
		user := false
		for _, sp := range spans {
			user = user || !s.cause.Before(sp[0]) && !s.cause.After(sp[1]) && !s.at.After(sp[1].Add(time.Second))
		}
		if user {
			continue
		}
		what := fmt.Sprintf("%s (speech from %s)", s.command.Summary(), s.cause.Format("15:04:05.000"))
		if released := l.releasedAt(s, i); s.command.Action == control.Duck && !released.IsZero() && released.Sub(s.at) <= flinch {
			flinches = append(flinches, fmt.Sprintf("%s, volume back after %v", what, released.Sub(s.at).Round(time.Millisecond)))
			continue
		}
		stops = append(stops, what)
	}
	return stops, flinches
}

// releasedAt returns when the manager restored the volume that stop i (a duck) lowered:
// its turn's first unduck after it, unless another stop came first (zero: never).
func (l *liveLaptop) releasedAt(s stop, i int) time.Time {
	for _, u := range l.unducks {
		if u.command.TurnID != s.command.TurnID || u.at.Before(s.at) {
			continue
		}
		if i+1 < len(l.stops) && l.stops[i+1].at.Before(u.at) {
			return time.Time{}
		}
		return u.at
	}
	return time.Time{}
}

// laptopServer is a private sound server wired like a laptop: the agent plays into
// agent_out, whose sound reaches the microphone (the room sink's monitor) through a
// loopback (30 ms, −6 dB, no rate adjustment), where the user's recordings are played
// too.
func laptopServer(t *testing.T) (*pulsetest.Server, pulsetest.Sink) {
	t.Helper()
	srv := pulsetest.New(t)
	ctx := context.Background()
	room := srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: 16000, Channels: 1})
	out := srv.NullSink(t, "agent_out", pulsetest.SinkOptions{Rate: 48000, Channels: 2})
	idx, err := srv.Pactl(ctx, "load-module", "module-loopback", "source="+out.Monitor, "sink="+room.Name,
		"latency_msec=100", "adjust_time=0", "source_dont_move=true", "sink_dont_move=true")
	if err != nil {
		t.Fatal(err)
	}
	// The loop's level is the laptop's: −6 dB.
	inputs, err := srv.Pactl(ctx, "--format=json", "list", "sink-inputs")
	if err != nil {
		t.Fatal(err)
	}
	var list []struct {
		Index       int    `json:"index"`
		OwnerModule string `json:"owner_module"` // pactl prints it as a string
	}
	if err := json.Unmarshal([]byte(inputs), &list); err != nil {
		t.Fatalf("pactl list sink-inputs: %v", err)
	}
	loop := -1
	for _, in := range list {
		if in.OwnerModule == strings.TrimSpace(idx) {
			loop = in.Index
		}
	}
	if loop < 0 {
		t.Fatalf("no sink input of the loopback (module %s) in %s", strings.TrimSpace(idx), inputs)
	}
	if _, err := srv.Pactl(ctx, "set-sink-input-volume", strconv.Itoa(loop), "-6dB"); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetDefaultSource(ctx, room.Monitor); err != nil {
		t.Fatal(err)
	}
	if err := srv.SetDefaultSink(ctx, out.Name); err != nil {
		t.Fatal(err)
	}
	return srv, room
}

// liveOnLaptop runs a live session on the laptop server and talks to the agent: a
// question, a second question once the agent has answered the first, and a barge-in
// as soon as the agent's second answer is heard. It returns when the
// agent answered the barge-in, or earlier when stopAfterFirst says so (after the first
// stop or agent turn). It returns the session, the recordings' wall-clock spans and
// the watcher.
func liveOnLaptop(t *testing.T, cfg pipeline.Config, eng *pipeline.Engines, srv *pulsetest.Server, room pulsetest.Sink, stopAfterFirst bool) (*pipeline.LiveResult, [][2]time.Time, *liveLaptop) {
	t.Helper()
	shared := testenv.SharedDir(t)
	question := filepath.Join(shared, "audio", "v2j_what_time_is_it.wav")
	second := filepath.Join(shared, "audio", "v2j_turn_on_living_room_lamp.wav")
	bargeIn := filepath.Join(shared, "audio", "goforward.wav")
	ctx, stopSession := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stopSession()
	watch := newLiveLaptop()
	var spans [][2]time.Time
	var driverErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer stopSession()
		fail := func(format string, args ...any) { driverErr = fmt.Errorf(format, args...) }
		// wait waits for the next agent turn, generously: the machine may be loaded.
		wait := func() (manager.AgentTurn, bool) {
			select {
			case a := <-watch.turns:
				return a, true
			case <-time.After(60 * time.Second):
				return manager.AgentTurn{}, false
			case <-ctx.Done():
				return manager.AgentTurn{}, false
			}
		}
		// play plays a recording into the room and notes when it could be heard.
		play := func(path string) *pulsetest.Process {
			p, err := srv.StartPlay(ctx, room.Name, path)
			if err != nil {
				fail("playing %s: %v", path, err)
				return nil
			}
			spans = append(spans, [2]time.Time{time.Now(), {}})
			return p
		}
		ended := func(p *pulsetest.Process) {
			if p != nil {
				_ = p.Wait()
				// The recording's last samples reach the microphone after paplay's and
				// the server's buffers.
				spans[len(spans)-1][1] = time.Now().Add(time.Second)
			}
		}
		select {
		case <-watch.listening:
		case <-time.After(60 * time.Second):
			fail("the microphone delivers nothing")
			return
		}
		ended(play(question))
		first, ok := wait()
		if !ok || stopAfterFirst {
			if !ok {
				fail("no answer to the first question")
			}
			return
		}
		if first.Interrupted {
			fail("the first answer was interrupted: %s", first.Summary())
			return
		}
		ended(play(second))
		// Barge in as soon as the second answer is heard: the recording's speech starts
		// half a second in, and the answers of the demo's model are short.
		var from time.Duration = -1
	listen:
		for {
			select {
			case pos := <-watch.playing:
				if from < 0 {
					from = pos
				} else if pos-from >= 100*time.Millisecond {
					break listen
				}
			case a := <-watch.turns:
				fail("the second answer ended before the barge-in: %s", a.Summary())
				return
			case <-time.After(60 * time.Second):
				fail("the agent never answered the second question")
				return
			case <-ctx.Done():
				return
			}
		}
		ended(play(bargeIn))
		// The next agent turn is the second answer, stopped by the barge-in or not; the
		// barge-in's reply comes after it. (An unstopped second answer is no reply to
		// it: ending the session then lost the barge-in's user turn whenever its
		// transcript came after the answer's end.)
		secondAnswer, ok := wait()
		if !ok {
			fail("the second answer never ended")
			return
		}
		for {
			a, ok := wait()
			if !ok {
				fail("no reply to the barge-in")
				return
			}
			if a.InReplyTo > secondAnswer.InReplyTo && !a.Interrupted {
				return // the barge-in was answered
			}
		}
	}()
	cfg.Audio.Input, cfg.Audio.Output = "pulse", "pulse"
	var transcript strings.Builder
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	res, err := pipeline.Live(ctx, cfg, eng, pipeline.LiveOptions{Console: console.NewTerminal(&transcript, nil, false), SessionDir: filepath.Join(t.TempDir(), "session"),
		Observers: []iu.Observer{watch}, Logger: log})
	<-done
	t.Cleanup(func() { watch.dump(t) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("echo cancellation %v; conversation:\n%s", res.Echo.Decision, transcript.String())
	if driverErr != nil {
		t.Fatal(driverErr)
	}
	return res, spans, watch
}

// TestLiveEchoThroughPulseAudio runs the live agent (PortAudio microphone and speaker)
// on a real PulseAudio server wired like a laptop: what the agent plays comes back into
// the microphone through a loopback (30 ms, −6 dB), where the user's recordings are
// played as well. With the echo canceller the agent answers a question without
// stopping for its own voice, and a barge-in over its next answer stops it. Without,
// it stops for its own voice. With PulseAudio's own module-echo-cancel as the
// microphone, echo_cancel auto leaves the cancelling to the server.
func TestLiveEchoThroughPulseAudio(t *testing.T) {
	cfg := pipetest.DemoConfig(t)
	cfg.LLM.MaxTokens = 48 // a long answer, to hear much of the agent's echo
	eng, err := pipeline.LoadEngines(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	t.Run("echo_cancel on", func(t *testing.T) {
		srv, room := laptopServer(t)
		cfg := cfg
		cfg.Audio.EchoCancel = "auto" // the null sink is no headset: auto cancels
		res, spans, watch := liveOnLaptop(t, cfg, eng, srv, room, false)
		if !res.Echo.Decision.On {
			t.Fatalf("auto decided %v on a laptop-like server", res.Echo)
		}
		self, flinches := watch.selfStops(spans)
		if len(self) > 0 {
			t.Errorf("the agent stopped for its own voice: %q", self)
		}
		if len(flinches) > 0 {
			t.Logf("the agent's volume dipped for its own voice, and came back within %v: %q", flinch, flinches)
		}
		interrupted := 0
		for _, e := range res.Transcript() {
			if e.Interrupted {
				interrupted++
			}
		}
		switch users := userLines(res.Transcript()); {
		case interrupted > 1:
			t.Errorf("%d interrupted agent turns, want 1 (the barge-in's)", interrupted)
		case interrupted == 0 && users < 3:
			// In double talk the canceller may leave too little of the user's voice to
			// stop the agent in time; the barge-in must then at least not be lost.
			t.Errorf("the barge-in neither stopped the agent nor became a user turn (%d user turns)", users)
		case interrupted == 0:
			t.Logf("the barge-in did not stop the agent; it became a user turn after it")
		}
		t.Logf("echo canceller: %.2f%% of real time (%v for %v of audio)", 100*res.AECCost.RTF(), res.AECCost.Processing, res.AECCost.Audio)
	})

	t.Run("echo_cancel off", func(t *testing.T) {
		srv, room := laptopServer(t)
		cfg := cfg
		cfg.Audio.EchoCancel = "off"
		_, _, watch := liveOnLaptop(t, cfg, eng, srv, room, true)
		// Here every duck counts: the agent that ducks for its own voice, however
		// briefly, hears itself. Nothing of the user's plays over the first answer,
		// so every stop is the agent's own, also one at the answer's very start (the
		// agent yields to a voice that begins with its own) that the question's span
		// would claim.
		if stops, flinches := watch.selfStops(nil); len(stops)+len(flinches) == 0 {
			t.Errorf("without the canceller the agent never stopped for its own voice: the loopback carries no echo")
		} else {
			self := append(stops, flinches...)
			t.Logf("without the canceller: %q", self)
		}
	})
}

// TestResolveEchoCancelWithPulseAudio: what echo_cancel auto decides for the devices a
// real PulseAudio server leads "pulse" to.
func TestResolveEchoCancelWithPulseAudio(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, srv *pulsetest.Server)
		output string // audio.output ("pulse" when empty)
		on     bool
		why    string
	}{
		{name: "speakers", on: true, why: "may reach the microphone", setup: func(t *testing.T, srv *pulsetest.Server) {
			out := srv.NullSink(t, "speakers", pulsetest.SinkOptions{})
			mustPactl(t, srv, "set-default-sink", out.Name)
			mustPactl(t, srv, "set-default-source", out.Monitor)
		}},
		{name: "headset", on: false, why: "headset", setup: func(t *testing.T, srv *pulsetest.Server) {
			out := srv.NullSink(t, "usb_headset", pulsetest.SinkOptions{})
			mustPactl(t, srv, "set-default-sink", out.Name)
			mustPactl(t, srv, "set-default-source", out.Monitor)
		}},
		{name: "a headset named in the config", output: "usb_headset", on: false, why: "headset", setup: func(t *testing.T, srv *pulsetest.Server) {
			out := srv.NullSink(t, "speakers", pulsetest.SinkOptions{})
			srv.NullSink(t, "usb_headset", pulsetest.SinkOptions{})
			mustPactl(t, srv, "set-default-sink", out.Name)
			mustPactl(t, srv, "set-default-source", out.Monitor)
		}},
		{name: "module-echo-cancel", on: false, why: "already cancels", setup: func(t *testing.T, srv *pulsetest.Server) {
			room := srv.NullSink(t, "room", pulsetest.SinkOptions{Rate: 16000, Channels: 1})
			out := srv.NullSink(t, "speakers", pulsetest.SinkOptions{})
			mustPactl(t, srv, "load-module", "module-echo-cancel", "source_master="+room.Monitor, "sink_master="+out.Name)
			mustPactl(t, srv, "set-default-sink", out.Name+".echo-cancel")
			mustPactl(t, srv, "set-default-source", room.Monitor+".echo-cancel")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := pulsetest.New(t)
			tc.setup(t, srv)
			output := tc.output
			if output == "" {
				output = "pulse"
			}
			s := pipeline.ResolveEchoCancel(ctx, pipeline.AudioConfig{Input: "pulse", Output: output})
			t.Logf("%v; server %s; devices %+v; problems %q", s.Decision, s.Server, s.Devices, s.Problems)
			if s.Decision.On != tc.on || !strings.Contains(s.Decision.Reason, tc.why) || s.Server == "" || len(s.Problems) > 0 {
				t.Errorf("decided %v (server %q, problems %q), want on %v because %q", s.Decision, s.Server, s.Problems, tc.on, tc.why)
			}
		})
	}
	// A setting other than auto asks no one.
	if s := pipeline.ResolveEchoCancel(ctx, pipeline.AudioConfig{EchoCancel: "off"}); s.Decision.On || s.Server != "" {
		t.Errorf("echo_cancel off: %+v", s)
	}
}

func mustPactl(t *testing.T, srv *pulsetest.Server, args ...string) {
	t.Helper()
	if _, err := srv.Pactl(context.Background(), args...); err != nil {
		t.Fatal(err)
	}
}

// userLines counts the user's lines of a transcript (backchannels aside).
func userLines(tr []dialogue.Utterance) int {
	n := 0
	for _, e := range tr {
		if e.Speaker == dialogue.User && !e.Backchannel {
			n++
		}
	}
	return n
}
