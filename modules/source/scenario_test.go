package source

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/audio/voices"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestParseScenario(t *testing.T) {
	t.Setenv("PARLEY_SHARED", "/assets")
	t.Setenv("PARLEY_TEST_DIR", "/elsewhere")
	dir := "/scenarios"
	tests := []struct {
		name    string
		yaml    string
		check   func(t *testing.T, sc *Scenario)
		wantErr string // substring; "" means success
	}{
		{
			name: "full",
			yaml: `name: demo
description: two speakers
expect: something happens
tail: 3.0
recordings:
  - file: ${PARLEY_SHARED}/audio/jfk.wav
    at: 0.5
    role: user
  - file: a.wav
    at: 1500ms
    gain: 0.25
    name: second
    expect: barge-in
    note: free text
  - file: $SHARED/b.wav
  - file: $PARLEY_TEST_DIR/c.wav
    at: 2
marks:
  - at: 9
    name: barge-in
    role: check
    expect: stop
`,
			check: func(t *testing.T, sc *Scenario) {
				if sc.Name != "demo" || sc.Description != "two speakers" || sc.Expect != "something happens" || sc.Tail != 3*time.Second {
					t.Errorf("header: %+v", sc)
				}
				want := []Recording{
					{File: "/assets/audio/jfk.wav", At: 500 * time.Millisecond, Gain: 1, Name: "jfk.wav", Role: "user", Line: 6},
					{File: "/scenarios/a.wav", At: 1500 * time.Millisecond, Gain: 0.25, Name: "second", Expect: "barge-in", Note: "free text", Line: 9},
					{File: "/assets/b.wav", Gain: 1, Name: "b.wav", Line: 15},
					{File: "/elsewhere/c.wav", At: 2 * time.Second, Gain: 1, Name: "c.wav", Line: 16},
				}
				if len(sc.Recordings) != len(want) {
					t.Fatalf("%d recordings, want %d", len(sc.Recordings), len(want))
				}
				for i := range want {
					if sc.Recordings[i] != want[i] {
						t.Errorf("recording %d = %+v\nwant %+v", i, sc.Recordings[i], want[i])
					}
				}
				if len(sc.Marks) != 1 || sc.Marks[0] != (Mark{At: 9 * time.Second, Name: "barge-in", Role: "check", Expect: "stop", Line: 19}) {
					t.Errorf("marks = %+v", sc.Marks)
				}
			},
		},
		{
			name: "flow style",
			yaml: `recordings: [{file: x.wav, at: 0.5}, {file: y.wav, at: 9.0, gain: 1.0}]`,
			check: func(t *testing.T, sc *Scenario) {
				if len(sc.Recordings) != 2 || sc.Recordings[1].At != 9*time.Second || sc.Tail != 0 {
					t.Errorf("%+v", sc)
				}
			},
		},
		{
			name: "echo",
			yaml: "recordings: [{file: a.wav}]\necho:\n  delay: 30ms\n  gain_db: -6\n  rt60: 0.3\n  noise_db: -70\n  noise: white\n  seed: 9\n",
			check: func(t *testing.T, sc *Scenario) {
				want := room.Config{Delay: 30 * time.Millisecond, GainDB: -6, RT60: 300 * time.Millisecond, NoiseDB: -70, Noise: room.White, Seed: 9}
				if sc.Echo == nil || *sc.Echo != want {
					t.Errorf("echo = %+v, want %+v", sc.Echo, want)
				}
			},
		},
		{
			name: "no echo",
			yaml: "recordings: [{file: a.wav}]\n",
			check: func(t *testing.T, sc *Scenario) {
				if sc.Echo != nil {
					t.Errorf("echo = %+v", sc.Echo)
				}
			},
		},
		{name: "echo without gain", yaml: "recordings: [{file: a.wav}]\necho:\n  delay: 30ms\n", wantErr: "line 2: the echo block needs"},
		{name: "echo with positive gain", yaml: "recordings: [{file: a.wav}]\necho: {delay: 0.03, gain_db: 6}\n", wantErr: "line 2: echo: room: invalid echo path: gain_db"},
		{name: "echo too long", yaml: "recordings: [{file: a.wav}]\necho: {delay: 5s, gain_db: -6}\n", wantErr: "delay"},
		{name: "echo bad noise", yaml: "recordings: [{file: a.wav}]\necho: {delay: 0, gain_db: -6, noise: brown}\n", wantErr: "noise color"},
		{name: "echo unknown field", yaml: "recordings: [{file: a.wav}]\necho: {delay: 0, gain_db: -6, reverb: 1}\n", wantErr: "reverb"},
		{name: "empty", yaml: "", wantErr: "empty"},
		{name: "only a comment", yaml: "# nothing\n", wantErr: "empty"},
		{name: "no recordings", yaml: "name: x\n", wantErr: "no recordings"},
		{name: "unknown top-level field", yaml: "name: x\ntails: 3\nrecordings: [{file: a.wav}]\n", wantErr: "line 2"},
		{name: "unknown recording field", yaml: "recordings:\n  - file: a.wav\n    start: 3\n", wantErr: "line 3"},
		{name: "negative time", yaml: "recordings:\n  - file: a.wav\n  - file: b.wav\n    at: -1\n", wantErr: "line 4"},
		{name: "negative duration", yaml: "recordings:\n  - file: a.wav\n    at: -2s\n", wantErr: "line 3"},
		{name: "bad time", yaml: "recordings:\n  - file: a.wav\n    at: soon\n", wantErr: "line 3"},
		{name: "infinite time", yaml: "recordings:\n  - file: a.wav\n    at: .inf\n", wantErr: "line 3"},
		{name: "time as a list", yaml: "recordings:\n  - file: a.wav\n    at: [1]\n", wantErr: "line 3"},
		{name: "negative tail", yaml: "tail: -3\nrecordings:\n  - file: a.wav\n", wantErr: "line 1"},
		{name: "missing file", yaml: "recordings:\n  - at: 1\n", wantErr: "line 2: recording without a file"},
		{name: "negative gain", yaml: "recordings:\n  - file: a.wav\n    gain: -1\n", wantErr: "line 2: gain"},
		{name: "NaN gain", yaml: "recordings:\n  - file: a.wav\n    gain: .nan\n", wantErr: "gain"},
		{name: "unset variable", yaml: "recordings:\n  - file: $NO_SUCH_PARLEY_VAR/a.wav\n", wantErr: "NO_SUCH_PARLEY_VAR is not set"},
		{name: "mark without time", yaml: "recordings: [{file: a.wav}]\nmarks:\n  - name: x\n", wantErr: "line 3: mark without a time"},
		{name: "not a mapping", yaml: "- a\n- b\n", wantErr: "invalid scenario"},
		{name: "broken YAML", yaml: "recordings: [file: a.wav\n", wantErr: "invalid scenario"},
		{name: "two documents", yaml: "recordings: [{file: a.wav}]\n---\nrecordings: [{file: b.wav}]\n", wantErr: "more than one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := ParseScenario([]byte(tc.yaml), dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalidScenario) {
					t.Fatalf("error = %v, want ErrInvalidScenario with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, sc)
		})
	}
}

func TestLoadScenarioErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	tests := []struct {
		name, path, wantErr string
	}{
		{"no such scenario", filepath.Join(dir, "none.yaml"), "no such file"},
		{"missing recording", write("missing.yaml", "recordings:\n  - file: a.wav\n  - file: gone.wav\n    at: 1\n"), "line 2"},
		{"recording is a directory", write("dir.yaml", "recordings:\n  - file: adir\n"), "is a directory"},
		{"too big", write("big.yaml", strings.Repeat("#", maxScenarioBytes+1)), "larger than"},
	}
	writeWAV(t, "unused.wav", tone(16000, 1, 10*time.Millisecond, 1, 0), 16)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadScenario(tc.path)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.path) && tc.name != "no such scenario" {
				t.Errorf("error %q does not name the scenario file", err)
			}
		})
	}
}

// TestScenarioMix builds a scenario of synthetic recordings at different rates and
// channel counts, with overlap, gain and a gap, and checks the stream sample by sample
// against the recordings converted whole and mixed by hand.
func TestScenarioMix(t *testing.T) {
	dir := t.TempDir()
	files := map[string]audio.Frame{
		"a.wav": tone(44100, 2, 700*time.Millisecond, 300, 0.6),
		"b.wav": tone(48000, 1, 500*time.Millisecond, 1000, 0.6), // overlaps a; sum clips
		"c.wav": tone(16000, 1, 300*time.Millisecond, 2000, 0.4), // after a gap
	}
	for name, f := range files {
		if err := audio.WriteWAVFile(filepath.Join(dir, name), f, 16); err != nil {
			t.Fatal(err)
		}
	}
	yaml := `tail: 0.25
recordings:
  - file: c.wav
    at: 2.0
  - file: a.wav
    at: 0.1
  - file: b.wav
    at: 0.5
    gain: 1.5
`
	scPath := filepath.Join(dir, "mix.yaml")
	os.WriteFile(scPath, []byte(yaml), 0o644)
	sc, err := LoadScenario(scPath)
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewScenario("scenario", sc, Config{LeadSilence: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	col, took, err := play(t, src, iu.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, col.frames, 320)
	got := col.samples()

	lead := 1600
	var parts []audio.Frame
	for _, rec := range sc.Recordings {
		f, err := audio.DecodeWAVFile(rec.File)
		if err != nil {
			t.Fatal(err)
		}
		p, err := audio.ToPipeline(f)
		if err != nil {
			t.Fatal(err)
		}
		audio.ApplyGain(p.Samples, float32(rec.Gain))
		p.Start = int64(lead) + audio.DurationToSamples(rec.At, audio.PipelineRate)
		parts = append(parts, p)
	}
	parts = append(parts, audio.Frame{Rate: audio.PipelineRate, Channels: 1}) // the stream starts at 0
	want, err := audio.MixFrames(parts...)
	if err != nil {
		t.Fatal(err)
	}
	clipped := audio.Clip(want.Samples)
	want.Samples = append(want.Samples, make([]float32, 4000)...) // the tail
	if len(got) != len(want.Samples) {
		t.Fatalf("stream holds %d samples, want %d", len(got), len(want.Samples))
	}
	for i := range got {
		if math.Abs(float64(got[i]-want.Samples[i])) > 1e-6 {
			t.Fatalf("sample %d (%.4f s) = %v, want %v", i, float64(i)/16000, got[i], want.Samples[i])
		}
	}
	if clipped == 0 {
		t.Fatal("the test meant the overlap to clip")
	}
	if logs.FilterMessageSnippet("clip").Len() == 0 {
		t.Error("clipping was not logged")
	}
	if last := col.frames[len(col.frames)-1]; took != audio.SamplesToDuration(last.End(), last.Rate) {
		t.Errorf("virtual time %v, last frame ends at %v", took, audio.SamplesToDuration(last.End(), last.Rate))
	}
}

// TestScenarioShared plays the scenario in testdata, which points at the shared
// recordings through ${PARLEY_SHARED} and $SHARED.
func TestScenarioShared(t *testing.T) {
	t.Setenv("PARLEY_SHARED", testenv.SharedDir(t))
	sc, err := LoadScenario(filepath.Join("testdata", "barge-in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Marks) != 1 || sc.Marks[0].Name != "barge-in" || sc.Recordings[1].Role != "barge-in" || sc.Recordings[1].Expect == "" {
		t.Fatalf("scenario notes not read: %+v", sc)
	}
	src, err := NewScenario("scenario", sc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	col, _, err := play(t, src)
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, col.frames, 320)
	var end time.Duration
	for _, rec := range sc.Recordings {
		f, err := audio.StatWAVFile(rec.File)
		if err != nil {
			t.Fatal(err)
		}
		end = max(end, rec.At+f.Duration())
	}
	got := col.samples()
	wantLen := audio.DurationToSamples(end+sc.Tail, audio.PipelineRate)
	if d := int64(len(got)) - wantLen; d < -2 || d > 2 {
		t.Fatalf("stream holds %d samples, want %d ± 2", len(got), wantLen)
	}
	// Silence before the first recording and in the tail; speech where recordings play.
	if audio.RMS(got[:7999]) != 0 || audio.RMS(got[len(got)-31000:]) != 0 {
		t.Error("expected silence before 0.5 s and in the last ~2 s")
	}
	if audio.RMS(got[8000:16000*3]) < 0.001 {
		t.Error("expected speech after 0.5 s")
	}
}

func TestScenarioBrokenRecording(t *testing.T) {
	dir := t.TempDir()
	good := tone(16000, 1, 400*time.Millisecond, 440, 0.5)
	audio.WriteWAVFile(filepath.Join(dir, "good.wav"), good, 16)
	os.WriteFile(filepath.Join(dir, "bad.wav"), []byte("RIFF\x00\x00\x00\x00WAVEjunkjunkjunk"), 0o644)
	os.WriteFile(filepath.Join(dir, "sc.yaml"), []byte("recordings:\n  - file: good.wav\n  - file: bad.wav\n    at: 1.0\n"), 0o644)
	sc, err := LoadScenario(filepath.Join(dir, "sc.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	_, err = NewScenario("scenario", sc, Config{})
	if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), "bad.wav") {
		t.Fatalf("NewScenario error = %v, want one naming bad.wav and line 3", err)
	}

	core, logs := observer.New(zapcore.WarnLevel)
	src, err := NewScenario("scenario", sc, Config{OnError: OnErrorSkip})
	if err != nil {
		t.Fatal(err)
	}
	col, _, err := play(t, src, iu.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	got := col.samples()
	// The good recording, then silence up to where the broken one was placed.
	if len(got) != 16000 {
		t.Fatalf("stream holds %d samples, want 16000 (up to the broken recording's time)", len(got))
	}
	if audio.RMS(got[:6400]) < 0.3 || audio.RMS(got[6400:]) != 0 {
		t.Error("want the tone, then silence")
	}
	if logs.FilterMessageSnippet("skipping broken recording").Len() != 1 {
		t.Errorf("logs: %v", logs.All())
	}

	// A recording that breaks after the source was built stops the network in fail mode.
	audio.WriteWAVFile(filepath.Join(dir, "bad.wav"), good, 16)
	src, err = NewScenario("scenario", sc, Config{})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "bad.wav"), []byte("not a wav any more"), 0o644)
	_, _, err = play(t, src)
	if !errors.Is(err, audio.ErrNotWAV) || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("network error = %v, want ErrNotWAV naming line 3", err)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	audio.WriteWAVFile(filepath.Join(dir, "a.wav"), tone(16000, 1, 100*time.Millisecond, 440, 0.5), 16)
	os.WriteFile(filepath.Join(dir, "s.YML"), []byte("recordings: [{file: a.wav, at: 0.1}]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("recordings: [{file: a.wav, at: -1}]\n"), 0o644)
	tests := []struct {
		path    string
		samples int
		wantErr bool
	}{
		{"a.wav", 1600, false},
		{"s.YML", 3200, false},
		{"bad.yaml", 0, true},
		{"none.wav", 0, true},
	}
	for _, tc := range tests {
		src, err := Open("src", filepath.Join(dir, tc.path), Config{})
		if tc.wantErr {
			if err == nil {
				t.Errorf("Open(%s) succeeded", tc.path)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Open(%s): %v", tc.path, err)
		}
		col, _, err := play(t, src)
		if err != nil || len(col.samples()) != tc.samples {
			t.Errorf("Open(%s) played %d samples (%v), want %d", tc.path, len(col.samples()), err, tc.samples)
		}
	}
}

func TestNewScenarioRejects(t *testing.T) {
	if _, err := NewScenario("s", nil, Config{}); err == nil {
		t.Error("accepted a nil scenario")
	}
	if _, err := NewScenario("s", &Scenario{}, Config{}); err == nil {
		t.Error("accepted a scenario without recordings")
	}
	if _, err := NewScenario("s", &Scenario{Recordings: []Recording{{File: "/nonexistent/x.wav", Gain: 1}}}, Config{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing recording: %v", err)
	}
}

// FuzzParseScenario: the parser never panics, and what it accepts is sane.
func FuzzParseScenario(f *testing.F) {
	seeds := []string{
		"recordings: [{file: x.wav, at: 0.5}, {file: y.wav, at: 9.0, gain: 1.0}]\ntail: 3.0\n",
		"name: a\nrecordings:\n  - file: ${PARLEY_SHARED}/audio/jfk.wav\n    at: 1500ms\nmarks:\n  - at: 2\n    name: m\n",
		"recordings:\n  - file: a.wav\n    at: -1\n",
		"recordings: &a [{file: a.wav}]\nmarks: *a\n",
		"tail: .nan\nrecordings: [{file: a}]",
		"recordings: [{file: $X}]",
		"recordings:\n  - file: ${PARLEY_SHARED}/a.wav\n    says: what time is it\n",
		"recordings: [{file: $SHARED/a.wav, says: \"\\0\"}]",
		"recordings: [{file: a}]\necho: {delay: 30ms, gain_db: -6, rt60: 0.3, noise_db: -70}\n",
		"recordings: [{file: a}]\necho: {delay: .inf, gain_db: .nan}\n",
		"recordings:\n  - says: hi\n    voice: flite:slt\n    pitch: 2\n    rate: 0.9\n    event: pause\n  - sound: {kind: hum, pitch: 110}\n    after_previous: 300ms\n",
		"recordings: [{sound: {kind: room, length: 2s}}, {file: a, at: 9, after_agent: {turn: 1, offset: 200ms}, event: interruption}]",
		"recordings: [{says: x, voice: 'espeak-ng:en+$(rm)'}, {sound: {kind: noise, length: .inf}}]",
		"recordings:\n  - sentence: \"i need eggs, | milk, | and some bread\"\n    part: 2\n    voice: flite:slt\n    at: 1\n",
		"recordings: [{sentence: 'a | | b', part: 1, voice: flite:kal}, {sentence: '|', part: 0}]",
		"- a\n",
		"{",
		"",
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "barge-in.yaml")); err == nil {
		seeds = append(seeds, string(b))
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		sc, err := ParseScenario([]byte(data), "/base")
		if err != nil {
			if !errors.Is(err, ErrInvalidScenario) {
				t.Fatalf("error %v does not wrap ErrInvalidScenario", err)
			}
			return
		}
		if len(sc.Recordings) == 0 || sc.Tail < 0 {
			t.Fatalf("accepted %+v", sc)
		}
		for _, r := range sc.Recordings {
			if r.At < 0 || r.At > maxTimelinePosition || r.Gain < 0 || math.IsNaN(r.Gain) || r.Name == "" ||
				!filepath.IsAbs(r.File) && (r.File != "" || r.Says == "" && !r.Made()) || strings.ContainsRune(r.Says, 0) || !utf8.ValidString(r.Says) {
				t.Fatalf("accepted recording %+v", r)
			}
			if r.Voice != nil && (r.Voice.Validate() != nil || r.Says == "") || r.Sound != nil && r.Sound.Validate() != nil {
				t.Fatalf("accepted a made recording %+v", r)
			}
			if p := r.Part; p != nil {
				words := voices.Words(p.Sentence)
				if r.Voice == nil || p.Index < 1 || p.Index > p.Parts || p.From < 1 || p.To < p.From || p.To > len(words) ||
					!slices.Equal(voices.Words(r.Says), words[p.From-1:p.To]) || strings.Contains(p.Sentence, voices.CutMark) {
					t.Fatalf("accepted a part of a sentence %+v (part %+v)", r, p)
				}
			}
			if r.AfterAgent != nil && (r.AfterAgent.Turn < 1 || r.AfterAgent.Offset < 0) || r.AfterPrevious != nil && *r.AfterPrevious < 0 {
				t.Fatalf("accepted a placement %+v", r)
			}
		}
		for _, m := range sc.Marks {
			if m.At < 0 || m.At > maxTimelinePosition {
				t.Fatalf("accepted mark %+v", m)
			}
		}
		if sc.Echo != nil {
			if err := sc.Echo.Validate(); err != nil {
				t.Fatalf("accepted echo %+v: %v", sc.Echo, err)
			}
		}
	})
}
