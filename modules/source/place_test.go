package source

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/voices"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/speaker"
)

// TestParseMadeAndPlaced reads the keys of made and placed recordings, and rejects what
// does not fit together.
func TestParseMadeAndPlaced(t *testing.T) {
	sc, err := ParseScenario([]byte(`recordings:
  - says: i would like uh
    voice: flite:rms
    pitch: -2
    rate: 0.9
    at: 0.5
    event: pause
  - says: a cup of tea
    voice: espeak-ng:en-gb-scotland
    after_previous: 600ms
    event: turn-end
  - sound: {kind: hum, shape: mhm, pitch: 190}
    after_agent: {turn: 1, offset: 1.2}
    at: 15
    event: backchannel
  - sound: {kind: room, length: 8s, level: 0.02, seed: 4}
    role: background
`), "/base")
	if err != nil {
		t.Fatal(err)
	}
	r := sc.Recordings
	if *r[0].Voice != (voices.Voice{Engine: "flite", Name: "rms", Pitch: -2, Rate: 0.9}) || r[0].At != 500*time.Millisecond || r[0].Event != EventPause || r[0].Name != "i would like uh" || !r[0].Made() {
		t.Errorf("recording 0: %+v (voice %+v)", r[0], r[0].Voice)
	}
	if r[1].AfterPrevious == nil || *r[1].AfterPrevious != 600*time.Millisecond || r[1].Event != EventTurnEnd {
		t.Errorf("recording 1: %+v", r[1])
	}
	if r[2].Sound == nil || r[2].Sound.Kind != "hum" || r[2].Sound.Pitch != 190 || *r[2].AfterAgent != (AgentCue{Turn: 1, Offset: 1200 * time.Millisecond}) || r[2].At != 15*time.Second {
		t.Errorf("recording 2: %+v", r[2])
	}
	if r[3].Sound.Length != 8*time.Second || r[3].Event != "" || r[3].File != "" {
		t.Errorf("recording 3: %+v", r[3])
	}
	if !sc.HasAgentCues() {
		t.Error("no agent cues")
	}

	// A turn spoken as one sentence and cut into parts: each part says its words.
	sc, err = ParseScenario([]byte(`recordings:
  - sentence: "i need eggs, | milk, | and some bread"
    part: 1
    voice: flite:slt
    at: 0.5
    event: pause
  - sentence: "i need eggs, | milk, | and some bread"
    part: 3
    voice: flite:slt
    after_previous: 400ms
    event: turn-end
`), "/base")
	if err != nil {
		t.Fatal(err)
	}
	r = sc.Recordings
	if r[0].Says != "i need eggs," || r[0].Name != "i need eggs," || r[0].Voice == nil ||
		*r[0].Part != (SentencePart{Sentence: "i need eggs, milk, and some bread", Index: 1, Parts: 3, From: 1, To: 3}) {
		t.Errorf("part 1: %+v (part %+v)", r[0], r[0].Part)
	}
	if r[1].Says != "and some bread" || *r[1].Part != (SentencePart{Sentence: "i need eggs, milk, and some bread", Index: 3, Parts: 3, From: 5, To: 7}) {
		t.Errorf("part 3: %+v (part %+v)", r[1], r[1].Part)
	}

	for _, tc := range []struct{ yaml, want string }{
		{"recordings: [{voice: flite:slt}]", "says"},
		{"recordings: [{sentence: 'a | b', part: 1}]", "give the voice"},
		{"recordings: [{sentence: 'a | b', voice: flite:slt}]", "part 0"},
		{"recordings: [{sentence: 'a | b', part: 3, voice: flite:slt}]", "2 parts"},
		{"recordings: [{sentence: 'a | b', part: 1, says: a, voice: flite:slt}]", "leave out says"},
		{"recordings: [{sentence: 'a | | b', part: 1, voice: flite:slt}]", "no words"},
		{"recordings: [{sentence: 'call 911 | now', part: 1, voice: flite:slt}]", "numbers written out"},
		{"recordings: [{says: hi, part: 1, voice: flite:slt}]", "which sentence"},
		{"recordings: [{sound: {kind: hum}, sentence: 'a | b', part: 1}]", "give the voice"},
		{"recordings: [{says: hi, voice: flite}]", "engine:name"},
		{"recordings: [{says: hi, voice: 'say:x'}]", "unknown engine"},
		{"recordings: [{says: hi, voice: flite:slt, pitch: 20}]", "pitch"},
		{"recordings: [{says: hi, pitch: 2}]", "give the voice"},
		{"recordings: [{says: hi, voice: flite:slt, sound: {kind: hum}}]", "not both"},
		{"recordings: [{sound: {kind: hum}, says: hi}]", "no words"},
		{"recordings: [{sound: {kind: bang}}]", "unknown kind"},
		{"recordings: [{sound: {kind: hum, colour: red}}]", "colour"},
		{"recordings: [{file: a.wav, event: shout}]", "event"},
		{"recordings: [{file: a.wav, after_previous: 1}]", "no previous"},
		{"recordings: [{file: a.wav}, {file: b.wav, at: 1, after_previous: 1}]", "leave out at"},
		{"recordings: [{file: a.wav, after_agent: {turn: 1}}]", "needs at"},
		{"recordings: [{file: a.wav, at: 3, after_agent: {turn: 0}}]", "turn 0"},
		{"recordings: [{file: a.wav, at: 3, after_agent: {turn: 1, offset: -1}}]", "offset"},
		{"recordings: [{file: a.wav, at: 3, after_agent: {turn: 1}}, {file: b.wav, after_previous: 1}]", "previous recording is placed after the agent"},
		{"recordings: [{file: a.wav, at: 3, after_agent: {turn: 1}, after_previous: 1}]", "not both"},
	} {
		_, err := ParseScenario([]byte(tc.yaml), "/base")
		if !errors.Is(err, ErrInvalidScenario) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an invalid scenario mentioning %q", tc.yaml, err, tc.want)
		}
	}
}

// speechFile writes a WAV file of silence, a tone from on to off, and silence to its
// end, at 16 kHz.
func speechFile(t *testing.T, on, off, end time.Duration) string {
	t.Helper()
	f := audio.Frame{Rate: audio.PipelineRate, Channels: 1, Samples: make([]float32, audio.DurationToSamples(end, audio.PipelineRate))}
	tn := tone(audio.PipelineRate, 1, off-on, 440, 0.5)
	copy(f.Samples[audio.DurationToSamples(on, audio.PipelineRate):], tn.Samples)
	return writeWAV(t, "speech.wav", f, 16)
}

// firstSound returns where samples first rise above a tenth of full scale, or -1.
func firstSound(samples []float32, from int) int {
	for i := from; i < len(samples); i++ {
		if samples[i] > 0.1 || samples[i] < -0.1 {
			return i
		}
	}
	return -1
}

// TestAfterPrevious: the speech of a recording placed after the previous one starts
// exactly that long after the previous one's speech ends.
func TestAfterPrevious(t *testing.T) {
	a := speechFile(t, 100*time.Millisecond, 600*time.Millisecond, 900*time.Millisecond)
	b := speechFile(t, 200*time.Millisecond, 500*time.Millisecond, 700*time.Millisecond)
	sc, err := ParseScenario([]byte("tail: 0.1\nrecordings:\n  - file: "+a+"\n    at: 0.3\n  - file: "+b+"\n    after_previous: 450ms\n"), "/")
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewScenario("scenario", sc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	col, _, err := play(t, src)
	if err != nil {
		t.Fatal(err)
	}
	got := col.samples()
	// a's speech ends at 0.3 + 0.6 s; b's starts 450 ms later.
	wantOnset := int(audio.DurationToSamples(900*time.Millisecond+450*time.Millisecond, audio.PipelineRate))
	if on := firstSound(got, int(audio.DurationToSamples(1000*time.Millisecond, audio.PipelineRate))); on < wantOnset-2 || on > wantOnset+2 {
		t.Errorf("the second recording's speech starts at sample %d, want %d", on, wantOnset)
	}
	p := src.Placements()
	if len(p) != 2 || p[1].How != PlacedAfterPrevious || p[1].Start != 1350*time.Millisecond-200*time.Millisecond {
		t.Errorf("placements %+v", p)
	}
}

// chunk is agent audio of a turn, as the speaker's progress names it.
type chunk struct{ turn int }

func (chunk) Kind() string     { return "speech" }
func (chunk) Summary() string  { return "chunk" }
func (c chunk) AgentTurn() int { return c.turn }
func (chunk) PCM() audio.Frame {
	return audio.Frame{Rate: 22050, Channels: 1, Samples: make([]float32, 441)}
}
func (chunk) IsTentative() bool { return false }

// fakeSpeaker reports that agent turns became audible: at each time, the turn's first
// audio IU has been heard for heardFor. It ends when its input does.
type fakeSpeaker struct {
	at       []time.Duration
	turns    []int
	heardFor time.Duration
	start    time.Time
}

func (f *fakeSpeaker) Name() string { return "speaker" }

func (f *fakeSpeaker) Run(ctx context.Context, p *iu.Ports) error {
	for i, at := range f.at {
		if _, err := waitUntil(ctx, p, f.start.Add(at), func(iu.Message, time.Time) {}); err != nil {
			return err
		}
		for _, state := range []speaker.State{speaker.Playing, speaker.Playing} { // the second report is no new turn
			u := p.NewIU(speaker.Progress{State: state, Item: chunk{f.turns[i]}, Offset: int(audio.DurationToSamples(f.heardFor, 22050)), Length: 441})
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
		}
	}
	for {
		ev, err := p.Next(ctx, time.Time{})
		if err != nil || ev.Kind == iu.EventInputDone {
			return err
		}
	}
}

// playCued plays the scenario with a fake speaker reporting turns at times; it returns
// the stream and the placements.
func playCued(t *testing.T, yaml string, spk *fakeSpeaker) ([]float32, []Placement) {
	t.Helper()
	sc, err := ParseScenario([]byte(yaml), "/")
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewScenario("input", sc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewVirtual(virtualStart)
	defer clk.Close()
	spk.start = virtualStart
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	col := &collector{stop: cancel}
	net := iu.NewNetwork(iu.WithClock(clk))
	if err := net.Add(src, col, spk); err != nil {
		t.Fatal(err)
	}
	// The speaker hears the source too, so that it ends after it, as in a pipeline.
	for _, l := range [][2]iu.Module{{src, col}, {spk, src}, {src, spk}} {
		if err := net.Connect(l[0], l[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return col.samples(), src.Placements()
}

// TestAfterAgent: a recording placed after the agent's turn plays its speech that long
// after the turn became audible, counted in the order the turns did; a turn that never
// does leaves the recording to its fallback; an offset too small for the frame in
// flight starts the speech as soon as it can, leaving out leading silence.
func TestAfterAgent(t *testing.T) {
	rec := speechFile(t, 100*time.Millisecond, 400*time.Millisecond, 600*time.Millisecond)
	const heardFor = 10 * time.Millisecond
	yaml := "tail: 0.2\nrecordings:\n  - file: " + rec + "\n    at: 0.2\n" +
		"  - file: " + rec + "\n    after_agent: {turn: 2, offset: 300ms}\n    at: 9\n" +
		"  - file: " + rec + "\n    after_agent: {turn: 1, offset: 200ms}\n    at: 9\n"
	// The agent's turn 2 becomes audible at 1.5 s (turn 1 for the count), turn 4 at 3 s.
	spk := &fakeSpeaker{at: []time.Duration{1500 * time.Millisecond, 3 * time.Second}, turns: []int{2, 4}, heardFor: heardFor}
	got, placed := playCued(t, yaml, spk)
	check := func(label string, from, want time.Duration) {
		t.Helper()
		on := firstSound(got, int(audio.DurationToSamples(from, audio.PipelineRate)))
		w := int(audio.DurationToSamples(want, audio.PipelineRate))
		if on < w-1 || on > w+5 { // the tone rises above a tenth in its third sample
			t.Errorf("%s: speech starts at %v, want %v", label, audio.SamplesToDuration(int64(on), audio.PipelineRate), want)
		}
	}
	check("turn 1", 1*time.Second, 1500*time.Millisecond-heardFor+200*time.Millisecond)
	check("turn 2", 2500*time.Millisecond, 3*time.Second-heardFor+300*time.Millisecond)
	if len(placed) != 3 || placed[1].How != PlacedAfterAgent || placed[1].Index != 2 || placed[2].Index != 1 {
		t.Errorf("placements %+v", placed)
	}
	// Deterministic: again, the same stream.
	again, _ := playCued(t, yaml, &fakeSpeaker{at: spk.at, turns: spk.turns, heardFor: heardFor})
	if len(again) != len(got) {
		t.Fatalf("a second run is %d samples long, the first %d", len(again), len(got))
	}
	for i := range got {
		if got[i] != again[i] {
			t.Fatalf("a second run differs at sample %d", i)
		}
	}

	// The agent's second turn never comes: its recording plays at its fallback.
	got, placed = playCued(t, yaml, &fakeSpeaker{at: []time.Duration{1500 * time.Millisecond}, turns: []int{2}, heardFor: heardFor})
	check("fallback", 2500*time.Millisecond, 9*time.Second+100*time.Millisecond)
	if len(placed) != 3 || placed[2].How != PlacedFallback {
		t.Errorf("placements %+v", placed)
	}

	// An offset of 0: the frame in flight is mixed, so the speech starts a frame after
	// the source learned of the turn (heardFor later than asked), leaving out 70 ms of
	// the recording's 100 ms of leading silence.
	yaml = "tail: 0.2\nrecordings:\n  - file: " + rec + "\n    at: 0.2\n" +
		"  - file: " + rec + "\n    after_agent: {turn: 1, offset: 0s}\n    at: 9\n"
	got, placed = playCued(t, yaml, &fakeSpeaker{at: []time.Duration{1500 * time.Millisecond}, turns: []int{2}, heardFor: heardFor})
	check("offset 0", 1*time.Second, 1500*time.Millisecond+audio.DefaultFrameDuration)
	if len(placed) != 2 || placed[1].Skipped <= 0 {
		t.Errorf("placements %+v", placed)
	}
}

// TestAfterAgentNeedsFiles: placing after the previous recording needs its file.
func TestAfterAgentNeedsFiles(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone.wav")
	rec := speechFile(t, 0, 100*time.Millisecond, 200*time.Millisecond)
	sc, err := ParseScenario([]byte("recordings:\n  - file: "+rec+"\n  - file: "+missing+"\n    after_previous: 1\n"), "/")
	if err != nil {
		t.Fatal(err)
	}
	sc.Recordings[1].File = missing
	if _, err := NewScenario("s", sc, Config{OnError: OnErrorSkip}); err == nil || !strings.Contains(err.Error(), "speech") {
		t.Errorf("%v", err)
	}
}
