package silero_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/engines/ggml"
	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modelstore"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/turnend"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/modules/vad/silero"
)

var virtualStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func modelPath(t testing.TB) string {
	t.Helper()
	if err := ggml.LoadBackends(); err != nil {
		testenv.Missing(t, "a ggml CPU backend", testenv.EnvFix)
	}
	whisper.SetLogger(whisper.LogNone, nil)
	return testenv.SharedFile(t, "models/"+modelstore.DefaultFile(modelstore.KindVAD))
}

// openVAD returns a VAD module scoring with Silero through libwhisper, as the agent
// runs it; the scorer is closed when the test ends.
func openVAD(t testing.TB, cfg vad.Config) *vad.Module {
	t.Helper()
	scorer, err := silero.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scorer.Close() })
	v, err := vad.New("vad", cfg, scorer)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOpen checks the scorer's errors: no model, a missing model.
func TestOpen(t *testing.T) {
	if _, err := silero.Open(vad.DefaultConfig()); err == nil {
		t.Error("Open without a model succeeded")
	}
	cfg := vad.DefaultConfig()
	cfg.Model = filepath.Join(t.TempDir(), "missing.bin")
	if _, err := silero.Open(cfg); err == nil {
		t.Error("Open of a missing model succeeded")
	}
}

// received is an update as a consumer saw it, with the network clock's offset.
type received struct {
	at time.Duration
	up iu.Update
}

// collector records everything it receives. Its slice is read after the network ran.
func collector(name string, out *[]received) iu.Module {
	return iu.ModuleFunc{ModuleName: name, Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case iu.EventMessage:
				for _, up := range ev.Message.Updates {
					*out = append(*out, received{at: p.Now().Sub(virtualStart), up: up})
				}
			case iu.EventInputDone:
				return nil
			}
		}
	}}
}

// progress is a stand-in for the speaker's progress payload: all the VAD reads is
// whether the agent is audible.
type progress struct{ audible bool }

func (progress) Kind() string      { return "progress" }
func (p progress) Summary() string { return fmt.Sprint("audible ", p.audible) }
func (p progress) Audible() bool   { return p.audible }

// speaker sends progress IUs saying the agent is audible during [from, to) of the
// network clock.
func speaker(from, to time.Duration) iu.Module {
	return iu.ModuleFunc{ModuleName: "speaker", Fn: func(ctx context.Context, p *iu.Ports) error {
		start := p.Now()
		for _, step := range []struct {
			at      time.Duration
			audible bool
		}{{from, true}, {to, false}} {
			for {
				ev, err := p.Next(ctx, start.Add(step.at))
				if err != nil {
					return err
				}
				if ev.Kind == iu.EventDeadline {
					break
				}
			}
			u := p.NewIU(progress{audible: step.audible})
			if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
				return err
			}
		}
		return nil
	}}
}

type runResult struct {
	segments []vad.Segment // committed, in order
	adds     []received
	eots     []vad.EndOfTurn // from the end-of-turn module
	all      []received
	audioIDs map[iu.ID]audio.Frame

	candidates         []received // ADDs of possible speech
	confirmed, dropped int
	eos                int // ends of stream passed on

	// pauses are the committed pauses' ends, with the segments they are grounded in;
	// resumed counts the revoked ones.
	pauses     []vad.Pause
	pausedSegs []iu.ID
	pauseAdds  int
	resumed    int
}

// runVAD plays path through a VAD module on a virtual clock, with the end-of-turn module
// ending turns after the VAD's end_of_turn of silence (as the incremental pipeline does).
func runVAD(t *testing.T, path string, cfg vad.Config, tail time.Duration, extra ...iu.Module) runResult {
	t.Helper()
	clk := clock.NewVirtual(virtualStart)
	defer clk.Close()
	net := iu.NewNetwork(iu.WithClock(clk))
	src, err := source.NewFile("source", path, source.Config{TailSilence: tail})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model = modelPath(t)
	v := openVAD(t, cfg)
	te := turnend.New("turn-end", turnend.Silence{After: v.HeardSilence(cfg.EndOfTurn)}, turnend.Waits{})
	var got, audioSeen, turns []received
	if err := net.Add(src, v, te, collector("sink", &got), collector("audio", &audioSeen), collector("turns", &turns)); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"source", "vad"}, {"vad", "sink"}, {"source", "audio"}, {"source", "turn-end"}, {"vad", "turn-end"}, {"turn-end", "turns"}} {
		if err := net.ConnectNames(c[0], c[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range extra {
		if err := net.Add(m); err != nil {
			t.Fatal(err)
		}
		if err := net.ConnectNames(m.Name(), "vad"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	res := runResult{all: got, audioIDs: map[iu.ID]audio.Frame{}}
	for _, r := range audioSeen {
		if f, ok := r.up.IU.Payload.(audio.Frame); ok && r.up.Type == iu.Add {
			res.audioIDs[r.up.IU.ID] = f
		}
	}
	for _, r := range turns {
		if pl, ok := r.up.IU.Payload.(vad.EndOfTurn); ok && r.up.Type == iu.Add {
			res.eots = append(res.eots, pl)
		}
	}
	for _, r := range got {
		switch pl := r.up.IU.Payload.(type) {
		case vad.Segment:
			switch r.up.Type {
			case iu.Add:
				res.adds = append(res.adds, r)
			case iu.Commit:
				res.segments = append(res.segments, pl)
			}
		case vad.EndOfStream:
			if r.up.Type == iu.Add {
				res.eos++
			}
		case vad.Pause:
			switch r.up.Type {
			case iu.Add:
				res.pauseAdds++
			case iu.Commit:
				res.pauses = append(res.pauses, pl)
				res.pausedSegs = append(res.pausedSegs, r.up.IU.GroundedIn...)
			case iu.Revoke:
				res.resumed++
			}
		case vad.Candidate:
			switch r.up.Type {
			case iu.Add:
				res.candidates = append(res.candidates, r)
			case iu.Commit:
				res.confirmed++
			case iu.Revoke:
				res.dropped++
			}
		default:
			t.Fatalf("the VAD forwarded a %s IU", r.up.IU.Payload.Kind())
		}
	}
	return res
}

func spans(segs []vad.Segment) []whisper.Span {
	out := make([]whisper.Span, len(segs))
	for i, s := range segs {
		out[i] = whisper.Span{Start: s.Start.Seconds(), End: s.End.Seconds()}
	}
	return out
}

func sameSpans(got, want []whisper.Span, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Abs(got[i].Start-want[i].Start) > tol || math.Abs(got[i].End-want[i].End) > tol {
			return false
		}
	}
	return true
}

// vadTool runs whisper.cpp's whisper-vad-speech-segments on path with its defaults.
func vadTool(t *testing.T, path string) []whisper.Span {
	t.Helper()
	tool := testenv.Command(t, "whisper-vad-speech-segments", testenv.EnvFix)
	cmd := exec.Command(tool, "-vm", modelPath(t), "-f", path, "-t", "1")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var segs []whisper.Span
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var i int
		var s, e float64
		// "Speech segment 0: start = 32.00, end = 227.00" (centiseconds)
		if _, err := fmt.Sscanf(strings.TrimSpace(sc.Text()), "Speech segment %d: start = %f, end = %f", &i, &s, &e); err == nil {
			segs = append(segs, whisper.Span{Start: s / 100, End: e / 100})
		}
	}
	if len(segs) == 0 {
		t.Fatalf("no segments in the output of %s:\n%s", tool, out)
	}
	return segs
}

// trimmedConfig is the default configuration with ends dated by the level (the
// default's are libwhisper's, by the probability alone).
func trimmedConfig() vad.Config {
	cfg := vad.DefaultConfig()
	cfg.EndTrim = 96 * time.Millisecond
	return cfg
}

// TestEndTrim: dated by the audio's level, jfk.wav's segments end where the voice does,
// before Silero's probability falls, and never more than end_trim before it.
func TestEndTrim(t *testing.T) {
	path := testenv.SharedFile(t, "audio/jfk.wav")
	silero := spans(runVAD(t, path, vad.DefaultConfig(), time.Second).segments)
	trimmed := spans(runVAD(t, path, trimmedConfig(), time.Second).segments)
	f, err := audio.DecodeWAVFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if f, err = audio.ToPipeline(f); err != nil {
		t.Fatal(err)
	}
	level := func(from, to float64) float64 { // dBFS of the audio between two times
		return audio.DBFS(audio.RMS(f.Samples[int(from*audio.PipelineRate):int(to*audio.PipelineRate)]))
	}
	trim := trimmedConfig().EndTrim.Seconds()
	pad := trimmedConfig().SpeechPad.Seconds()
	var earlier float64
	for _, seg := range trimmed {
		i := slices.IndexFunc(silero, func(s whisper.Span) bool { return s.Start <= seg.End && seg.End <= s.End+0.001 })
		if i < 0 {
			t.Fatalf("segment %v ends outside Silero's %v", seg, silero)
		}
		if d := silero[i].End - seg.End; d <= trim+0.001 {
			earlier += d
		} else if !slices.ContainsFunc(trimmed, func(s whisper.Span) bool { return s.Start > seg.End && s.Start < silero[i].End }) {
			// Otherwise a pause Silero bridged splits it: the rest must follow.
			t.Errorf("segment %v ends %.0f ms before Silero's %v, more than end_trim", seg, d*1000, silero[i])
		}
		// The voice has stopped there: the 30 ms after the end are far quieter than the
		// segment's loudest 100 ms.
		peak := math.Inf(-1)
		for at := seg.Start; at+0.1 <= seg.End; at += 0.01 {
			peak = max(peak, level(at, at+0.1))
		}
		if end := seg.End - pad; level(end, end+0.03) > peak-20 {
			t.Errorf("segment %v ends before the voice does: %.1f dB after it, %.1f at the loudest", seg, level(end, end+0.03), peak)
		}
	}
	t.Logf("Silero %v, by level %v: %.0f ms earlier in all", silero, trimmed, earlier*1000)
	if earlier < 0.1 {
		t.Errorf("ends by level %v, Silero's %v: less than 100 ms earlier in all", trimmed, silero)
	}
}

// TestJFKSegments is the acceptance test: the streaming VAD, fed frame by frame
// by the source module, finds the four segments whisper.cpp finds in jfk.wav, and so
// does whisper.cpp's own tool.
func TestJFKSegments(t *testing.T) {
	path := testenv.SharedFile(t, "audio/jfk.wav")
	want := []whisper.Span{{Start: 0.32, End: 2.27}, {Start: 3.27, End: 4.41}, {Start: 5.38, End: 7.68}, {Start: 8.16, End: 10.62}}

	res := runVAD(t, path, vad.DefaultConfig(), time.Second)
	if got := spans(res.segments); !sameSpans(got, want, 0.1) {
		t.Fatalf("streaming VAD segments %v, want %v (±100 ms)", got, want)
	}
	// Same windows, same rules: the streaming result is libwhisper's to the sample.
	if got := spans(res.segments); !sameSpans(got, want, 0.011) {
		t.Errorf("streaming VAD segments %v differ from libwhisper's %v by more than rounding", got, want)
	}
	if tool := vadTool(t, path); !sameSpans(tool, want, 0.011) {
		t.Errorf("whisper-vad-speech-segments found %v, expected %v", tool, want)
	}

	// Every segment's end was announced by a pause grounded in it, with the same end;
	// pauses the speech went on after were withdrawn.
	if len(res.pauses) != len(res.segments) || res.pauseAdds != len(res.pauses)+res.resumed {
		t.Errorf("%d pauses added, %d committed, %d withdrawn; %d segments", res.pauseAdds, len(res.pauses), res.resumed, len(res.segments))
	}
	for i := range min(len(res.pauses), len(res.segments), len(res.adds)) {
		if res.pauses[i].End != res.segments[i].End || res.pausedSegs[i] != res.adds[i].up.IU.ID {
			t.Errorf("pause %d ends at %v in %s; segment %s ends at %v", i, res.pauses[i].End, res.pausedSegs[i], res.adds[i].up.IU.ID, res.segments[i].End)
		}
	}

	cfg := vad.DefaultConfig()
	window := time.Duration(whisper.VADWindow) * time.Second / audio.PipelineRate
	frame := audio.DefaultFrameDuration
	// The end of the stream comes last, after the last segment.
	if last := res.all[len(res.all)-1].up.IU.Payload; res.eos != 1 || last.Kind() != "vad-eos" {
		t.Errorf("%d ends of stream passed on; the last IU is %s", res.eos, last.Summary())
	}
	// Every segment was announced by a candidate, sooner than its onset and from the
	// same start; candidates that were noise were withdrawn.
	if res.confirmed != len(res.adds) || len(res.candidates) != res.confirmed+res.dropped {
		t.Errorf("%d candidates: %d confirmed, %d withdrawn; %d segments", len(res.candidates), res.confirmed, res.dropped, len(res.adds))
	}
	for i := range min(len(res.candidates), len(res.adds)) {
		c, a := res.candidates[i], res.adds[i]
		if res.dropped == 0 && (c.up.IU.Payload.(vad.Candidate).Start != a.up.IU.Payload.(vad.Segment).Start || !c.up.IU.Created.Before(a.up.IU.Created)) {
			t.Errorf("candidate %d %+v (at %v) does not announce segment %+v (at %v)", i, c.up.IU.Payload, c.up.IU.Created, a.up.IU.Payload, a.up.IU.Created)
		}
	}
	for i, a := range res.adds {
		seg := a.up.IU.Payload.(vad.Segment)
		// Streaming: the onset is reported MinSpeech after the speech started (plus
		// at most a window and a frame of buffering), long before the file ends. The
		// source sends a frame when the clock reaches the frame's start, so the clock
		// may read up to a frame less than the stream position of the frame's end.
		rawStart := seg.Start + cfg.SpeechPad
		if i == 0 {
			rawStart = seg.Start + min(cfg.SpeechPad, seg.Start)
		}
		if lo, hi := rawStart+cfg.MinSpeech-frame, rawStart+cfg.MinSpeech+window+frame+time.Millisecond; a.at < lo || a.at > hi {
			t.Errorf("segment %d (%v) reported at %v, want within [%v, %v]", i, seg.Start, a.at, lo, hi)
		}
		if seg.End != 0 {
			t.Errorf("segment %d added with End %v", i, seg.End)
		}
		// Grounded in the audio IUs of the onset.
		if len(a.up.IU.GroundedIn) == 0 {
			t.Errorf("segment %d is grounded in nothing", i)
		}
		for _, id := range a.up.IU.GroundedIn {
			f, ok := res.audioIDs[id]
			if !ok {
				t.Fatalf("segment %d grounded in %s, which is no audio IU", i, id)
			}
			if f.End() <= audio.DurationToSamples(seg.Start, audio.PipelineRate) || f.StartTime() > a.at {
				t.Errorf("segment %d (onset %v, confirmed %v) grounded in audio %s", i, seg.Start, a.at, f.Summary())
			}
		}
	}
	// Ends are reported MergeGap after the raw end at the latest (plus buffering).
	for _, r := range res.all {
		if seg, ok := r.up.IU.Payload.(vad.Segment); ok && r.up.Type == iu.Commit {
			rawEnd := seg.End - cfg.SpeechPad
			if hi := rawEnd + cfg.MergeGap + window + frame + time.Millisecond; r.at > hi {
				t.Errorf("segment ending %v committed at %v, after %v", seg.End, r.at, hi)
			}
		}
	}
	// Pauses of 1.0 s and 0.97 s end turns (700 ms threshold); the 0.48 s one does not.
	if len(res.eots) != 3 {
		t.Fatalf("%d ends of turn, want 3: %+v", len(res.eots), res.eots)
	}
	wantTurns := [][2]float64{{0.32, 2.27}, {3.27, 4.41}, {5.38, 10.62}}
	for i, e := range res.eots {
		if math.Abs(e.SpeechStart.Seconds()-wantTurns[i][0]) > 0.011 || math.Abs(e.SpeechEnd.Seconds()-wantTurns[i][1]) > 0.011 {
			t.Errorf("turn %d: %v", i, e.Summary())
		}
		if e.Silence < cfg.EndOfTurn || e.Silence > cfg.EndOfTurn+window {
			t.Errorf("turn %d ended after %v of silence, want %v", i, e.Silence, cfg.EndOfTurn)
		}
	}
}

// TestMatchesLibwhisper runs every shared recording (resampled to 16 kHz mono by the
// source) through the module and compares with libwhisper's whole-buffer segmentation of
// the same audio, for the default settings and for a stricter configuration.
func TestMatchesLibwhisper(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(testenv.SharedDir(t), "audio", "*.wav"))
	if err != nil || len(paths) == 0 {
		testenv.Missing(t, "shared recordings", "the shared/audio folder should hold WAV files")
	}
	v, err := whisper.NewVAD(modelPath(t), whisper.VADParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	strict := vad.DefaultConfig()
	strict.Threshold, strict.MinSpeech, strict.MinSilence, strict.SpeechPad = 0.6, 400*time.Millisecond, 300*time.Millisecond, 100*time.Millisecond
	for _, cfg := range []vad.Config{vad.DefaultConfig(), strict} {
		for _, path := range paths {
			f, err := audio.DecodeWAVFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if f, err = audio.ToPipeline(f); err != nil {
				t.Fatal(err)
			}
			want, err := v.SpeechSegments(f.Samples, whisper.SegmentParams{
				Threshold: cfg.Threshold, MinSpeechMS: int(cfg.MinSpeech.Milliseconds()),
				MinSilenceMS: int(cfg.MinSilence.Milliseconds()), SpeechPadMS: int(cfg.SpeechPad.Milliseconds()),
			})
			if err != nil {
				t.Fatal(err)
			}
			// No tail: segments running into the end of the file must match too.
			res := runVAD(t, path, cfg, 0)
			got := spans(res.segments)
			// libwhisper measures a segment that runs to the end of the audio to the end
			// of its last (zero-padded) window; the module stops at the last real sample.
			if n := len(want); n > 0 && len(got) == n {
				if end := f.Duration().Seconds(); want[n-1].End > end {
					want[n-1].End = end
				}
			}
			if !sameSpans(got, want, 0.011) {
				t.Errorf("%s (threshold %.2f): streaming %v, libwhisper %v", filepath.Base(path), cfg.Threshold, got, want)
			}
			if len(want) > 0 && len(res.eots) == 0 {
				t.Errorf("%s: speech but no end of turn", filepath.Base(path))
			}
		}
	}
}

func TestOverlap(t *testing.T) {
	path := testenv.SharedFile(t, "audio/jfk.wav")
	// The agent speaks from 0 to 1 s, over the user's first onset at 0.32 s.
	res := runVAD(t, path, vad.DefaultConfig(), time.Second, speaker(0, time.Second))
	want := []bool{true, false, false, false}
	if len(res.adds) != len(want) {
		t.Fatalf("%d segments", len(res.adds))
	}
	for i, a := range res.adds {
		if got := a.up.IU.Payload.(vad.Segment).Overlap; got != want[i] {
			t.Errorf("segment %d overlap %v, want %v", i, got, want[i])
		}
	}
	// Audible only after the onset but before it was confirmed still counts.
	res = runVAD(t, path, vad.DefaultConfig(), time.Second, speaker(3400*time.Millisecond, 3500*time.Millisecond))
	for i, a := range res.adds {
		if got := a.up.IU.Payload.(vad.Segment).Overlap; got != (i == 1) {
			t.Errorf("agent audible 3.4–3.5 s: segment %d overlap %v", i, got)
		}
	}
}

func TestRejectsWrongAudio(t *testing.T) {
	clk := clock.NewVirtual(virtualStart)
	defer clk.Close()
	net := iu.NewNetwork(iu.WithClock(clk))
	bad := iu.ModuleFunc{ModuleName: "bad", Fn: func(ctx context.Context, p *iu.Ports) error {
		u := p.NewIU(audio.Frame{Samples: make([]float32, 960), Rate: 48000, Channels: 1})
		return p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
	}}
	cfg := vad.DefaultConfig()
	cfg.Model = modelPath(t)
	v := openVAD(t, cfg)
	if err := net.Add(bad, v); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(bad, v); err != nil {
		t.Fatal(err)
	}
	if err := net.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "16000 Hz mono") {
		t.Fatalf("48 kHz audio: %v", err)
	}
}

// feeder sends blocks of audio at the given stream positions, as a capture module that
// lost audio would.
func feeder(blocks []audio.Frame) iu.Module {
	return iu.ModuleFunc{ModuleName: "feeder", Fn: func(ctx context.Context, p *iu.Ports) error {
		for _, b := range blocks {
			for i := 0; i < len(b.Samples); i += 320 {
				f := audio.Frame{Samples: b.Samples[i:min(i+320, len(b.Samples))], Rate: audio.PipelineRate, Channels: 1, Start: b.Start + int64(i)}
				u := p.NewIU(f)
				if err := p.Send(ctx, iu.AddOf(u), iu.CommitOf(u)); err != nil {
					return err
				}
			}
		}
		return nil
	}}
}

// TestStreamGaps checks that missing audio keeps stream positions true: a short gap is
// scored as silence, a long jump restarts the detection at the new position.
func TestStreamGaps(t *testing.T) {
	f, err := audio.DecodeWAVFile(testenv.SharedFile(t, "audio/jfk.wav"))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Samples
	const sec = audio.PipelineRate
	tests := []struct {
		name   string
		blocks []audio.Frame
		want   []whisper.Span
	}{
		{
			// 0.1 s lost in the middle of the first segment: it still ends at 2.27 s.
			name: "short gap",
			blocks: []audio.Frame{
				{Samples: s[:sec], Start: 0},
				{Samples: s[sec+sec/10:], Start: sec + sec/10},
			},
			want: []whisper.Span{{Start: 0.32, End: 2.27}, {Start: 3.27, End: 4.41}, {Start: 5.38, End: 7.68}, {Start: 8.16, End: 10.62}},
		},
		{
			// The stream jumps 100 s ahead after 3 s: the first segment ends before the
			// jump and the rest lies 100 s later.
			name: "jump",
			blocks: []audio.Frame{
				{Samples: s[:3*sec], Start: 0},
				{Samples: s[3*sec:], Start: 103 * sec},
			},
			want: []whisper.Span{{Start: 0.32, End: 2.27}, {Start: 103.27, End: 104.41}, {Start: 105.38, End: 107.68}, {Start: 108.16, End: 110.62}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewVirtual(virtualStart)
			defer clk.Close()
			net := iu.NewNetwork(iu.WithClock(clk))
			cfg := vad.DefaultConfig()
			cfg.Model = modelPath(t)
			v := openVAD(t, cfg)
			var got []received
			src := feeder(tc.blocks)
			if err := net.Add(src, v, collector("sink", &got)); err != nil {
				t.Fatal(err)
			}
			net.Connect(src, v)
			net.ConnectNames("vad", "sink")
			if err := net.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			var segs []vad.Segment
			for _, r := range got {
				if seg, ok := r.up.IU.Payload.(vad.Segment); ok && r.up.Type == iu.Commit {
					segs = append(segs, seg)
				}
			}
			// Silence is not speech: Silero's probabilities around a gap differ a little
			// from the uncut file's, so allow a window or two.
			if got := spans(segs); !sameSpans(got, tc.want, 0.07) {
				t.Fatalf("segments %v, want %v", got, tc.want)
			}
		})
	}
}
