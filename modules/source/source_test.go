package source

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/iu"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// collector is a consumer module that keeps every audio frame it receives and checks
// that each arrives as ADD+COMMIT in one batch.
type collector struct {
	frames  []audio.Frame
	created []time.Time
	// eos is the end-of-stream IU, which must come last and name the stream's end.
	eos *audio.EndOfStream
	// stopAfter, when > 0, calls stop once that many frames have arrived.
	stopAfter int
	stop      context.CancelFunc
}

func (c *collector) Name() string { return "collector" }

func (c *collector) Run(ctx context.Context, p *iu.Ports) error {
	for {
		ev, err := p.Next(ctx, time.Time{})
		if err != nil {
			return err
		}
		switch ev.Kind {
		case iu.EventMessage:
			ups := ev.Message.Updates
			if len(ups) != 2 || ups[0].Type != iu.Add || ups[1].Type != iu.Commit || ups[0].IU.ID != ups[1].IU.ID {
				return fmt.Errorf("want one ADD+COMMIT per batch, got %v", ups)
			}
			if c.eos != nil {
				return fmt.Errorf("%s after the end of stream", ups[0].IU.Payload.Summary())
			}
			if e, ok := ups[0].IU.Payload.(audio.EndOfStream); ok {
				var end int64
				if n := len(c.frames); n > 0 {
					end = c.frames[n-1].End()
				}
				if e.Pos != end || e.Rate != audio.PipelineRate {
					return fmt.Errorf("end of stream %+v, want position %d at %d Hz", e, end, audio.PipelineRate)
				}
				c.eos = &e
				continue
			}
			f, ok := ups[0].IU.Payload.(audio.Frame)
			if !ok {
				return fmt.Errorf("payload %T is not an audio.Frame", ups[0].IU.Payload)
			}
			if f.Kind() != "audio" {
				return fmt.Errorf("payload kind %q", f.Kind())
			}
			c.frames = append(c.frames, f)
			c.created = append(c.created, ups[0].IU.Created)
			if c.stopAfter > 0 && len(c.frames) == c.stopAfter {
				c.stop()
			}
		case iu.EventInputDone:
			return nil
		}
	}
}

// samples joins the collected frames.
func (c *collector) samples() []float32 {
	var s []float32
	for _, f := range c.frames {
		s = append(s, f.Samples...)
	}
	return s
}

var virtualStart = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// play runs src into a collector on a virtual clock and returns what arrived, the
// virtual time the run took and the network's error.
func play(t *testing.T, src iu.Module, opts ...iu.Option) (*collector, time.Duration, error) {
	t.Helper()
	clk := clock.NewVirtual(virtualStart)
	defer clk.Close()
	return playOn(t, clk, src, opts...)
}

func playOn(t *testing.T, clk clock.Clock, src iu.Module, opts ...iu.Option) (*collector, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	col := &collector{stop: cancel}
	net := iu.NewNetwork(append([]iu.Option{iu.WithClock(clk)}, opts...)...)
	if err := net.Add(src, col); err != nil {
		t.Fatal(err)
	}
	if err := net.Connect(src, col); err != nil {
		t.Fatal(err)
	}
	start := clk.Now()
	err := net.Run(ctx)
	return col, clk.Now().Sub(start), err
}

// checkStream checks the invariants of every source's output: 16 kHz mono frames,
// contiguous from 0, all of the configured length except the last.
func checkStream(t *testing.T, frames []audio.Frame, frameLen int) {
	t.Helper()
	var pos int64
	for i, f := range frames {
		if f.Rate != audio.PipelineRate || f.Channels != 1 {
			t.Fatalf("frame %d is %d Hz x%d, want 16000 Hz mono", i, f.Rate, f.Channels)
		}
		if f.Start != pos {
			t.Fatalf("frame %d starts at %d, want %d (contiguous)", i, f.Start, pos)
		}
		if f.Len() == 0 || f.Len() > frameLen || (i < len(frames)-1 && f.Len() != frameLen) {
			t.Fatalf("frame %d holds %d samples, want %d", i, f.Len(), frameLen)
		}
		pos = f.End()
	}
}

func writeWAV(t *testing.T, name string, f audio.Frame, bits int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := audio.WriteWAVFile(path, f, bits); err != nil {
		t.Fatal(err)
	}
	return path
}

func tone(rate, channels int, d time.Duration, freq, amp float64) audio.Frame {
	n := int(audio.DurationToSamples(d, rate))
	f := audio.Frame{Rate: rate, Channels: channels, Samples: make([]float32, n*channels)}
	for i := 0; i < n; i++ {
		v := float32(amp * math.Sin(2*math.Pi*freq*float64(i)/float64(rate)))
		for c := 0; c < channels; c++ {
			f.Samples[i*channels+c] = v
		}
	}
	return f
}

// TestFileSharedRecordings plays every shared recording through a network on the
// virtual clock and compares the result with a whole-buffer conversion of the file.
func TestFileSharedRecordings(t *testing.T) {
	dir := filepath.Join(testenv.SharedDir(t), "audio")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.wav"))
	if len(paths) == 0 {
		testenv.Missing(t, "WAV files in "+dir, "the shared/ folder beside the project should contain them")
	}
	const frameLen = 320
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			src, err := NewFile("mic", path, Config{})
			if err != nil {
				t.Fatal(err)
			}
			col, took, err := play(t, src)
			if err != nil {
				t.Fatal(err)
			}
			checkStream(t, col.frames, frameLen)

			orig, err := audio.DecodeWAVFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := col.samples()
			wantDur := float64(orig.Len()) / float64(orig.Rate)
			gotDur := float64(len(got)) / audio.PipelineRate
			if math.Abs(gotDur-wantDur) > 0.020 {
				t.Fatalf("played %.4f s, the file lasts %.4f s", gotDur, wantDur)
			}
			// Pacing: the last frame went out when it ended on the stream clock, as from
			// a microphone.
			if last := col.frames[len(col.frames)-1]; took != audio.SamplesToDuration(last.End(), last.Rate) {
				t.Errorf("virtual run took %v, last frame ends at %v", took, audio.SamplesToDuration(last.End(), last.Rate))
			}

			// Energy: the speech band survives resampling; what is lost above 8 kHz in
			// the high-rate files is a small part of the energy.
			mono := audio.Downmix(orig)
			if r := audio.RMS(got) / audio.RMS(mono.Samples); math.Abs(r-1) > 0.05 {
				t.Errorf("RMS ratio after conversion %.4f, want within 5%% of 1", r)
			}

			// The streamed conversion matches converting the whole file at once: the
			// cross-correlation peaks at lag 0, and the samples agree.
			direct, err := audio.ToPipeline(orig)
			if err != nil {
				t.Fatal(err)
			}
			if len(direct.Samples) != len(got) {
				t.Fatalf("streamed %d samples, whole-file conversion %d", len(got), len(direct.Samples))
			}
			if lag := peakLag(got, direct.Samples, 50); lag != 0 {
				t.Errorf("cross-correlation with the direct conversion peaks at lag %d", lag)
			}
			var worst float64
			for i := range got {
				worst = math.Max(worst, math.Abs(float64(got[i]-direct.Samples[i])))
			}
			if worst > 1e-6 {
				t.Errorf("streamed and whole-file conversions differ by up to %g", worst)
			}
		})
	}
}

// peakLag returns the lag in [-maxLag, maxLag] at which a and b correlate best.
func peakLag(a, b []float32, maxLag int) int {
	best, bestLag := math.Inf(-1), 0
	for lag := -maxLag; lag <= maxLag; lag++ {
		var sum float64
		for i := range a {
			j := i + lag
			if j >= 0 && j < len(b) {
				sum += float64(a[i]) * float64(b[j])
			}
		}
		if sum > best {
			best, bestLag = sum, lag
		}
	}
	return bestLag
}

// TestFilePacingVirtual: on the virtual clock every frame is created exactly at its
// stream position, however long the file, and the run takes no real time to speak of.
func TestFilePacingVirtual(t *testing.T) {
	path := writeWAV(t, "long.wav", tone(44100, 2, 30*time.Second, 440, 0.3), 16)
	src, err := NewFile("mic", path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Now()
	col, took, err := play(t, src)
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, col.frames, 320)
	if len(col.frames) != 1500 {
		t.Fatalf("got %d frames, want 1500", len(col.frames))
	}
	for i, f := range col.frames {
		end := audio.SamplesToDuration(f.End(), f.Rate)
		if want := virtualStart.Add(end); !col.created[i].Equal(want) {
			t.Fatalf("frame %d created at %v, want %v (when its last sample was spoken)", i, col.created[i].Sub(virtualStart), end)
		}
	}
	if want := 30 * time.Second; took != want {
		t.Errorf("virtual time %v, want %v", took, want)
	}
	t.Logf("30 s of 44.1 kHz stereo replayed in %v of wall time", time.Since(wall))
}

// TestFilePacingReal: on the real clock 200 ms of audio takes about 200 ms (the last
// frame is due 200 ms after the start), without a tight upper bound that a loaded
// machine could break.
func TestFilePacingReal(t *testing.T) {
	path := writeWAV(t, "short.wav", tone(16000, 1, 200*time.Millisecond, 440, 0.3), 16)
	src, err := NewFile("mic", path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	col, _, err := playOn(t, clock.Real{}, src)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, col.frames, 320)
	if len(col.frames) != 10 {
		t.Fatalf("got %d frames, want 10", len(col.frames))
	}
	if elapsed < 175*time.Millisecond {
		t.Fatalf("200 ms of audio played in %v: not paced", elapsed)
	}
	// No frame goes out before its stream position (only lower bounds: a busy machine
	// may make frames late, never early).
	for i, f := range col.frames {
		if at := col.created[i].Sub(start); at < f.StartTime() {
			t.Errorf("frame %d went out at %v, before its position %v", i, at, f.StartTime())
		}
	}

	// Unpaced, the same file goes through as fast as the consumer takes it.
	src, err = NewFile("mic", path, Config{Pacing: PaceNone})
	if err != nil {
		t.Fatal(err)
	}
	col, _, err = playOn(t, clock.Real{}, src)
	if err != nil || len(col.frames) != 10 {
		t.Fatalf("unpaced run: %d frames, %v", len(col.frames), err)
	}
}

func TestFileConfig(t *testing.T) {
	const rate = 22050
	content := tone(rate, 1, 1*time.Second, 300, 0.5)
	path := writeWAV(t, "tone.wav", content, 16)
	tests := []struct {
		name     string
		cfg      Config
		frameLen int
		lead     int
		total    int
	}{
		{"defaults", Config{}, 320, 0, 16000},
		{"10 ms frames", Config{FrameDuration: 10 * time.Millisecond}, 160, 0, 16000},
		{"32 ms frames leave a short last frame", Config{FrameDuration: 32 * time.Millisecond}, 512, 0, 16000},
		{"lead and tail silence", Config{LeadSilence: 250 * time.Millisecond, TailSilence: 1500 * time.Millisecond}, 320, 4000, 16000 + 4000 + 24000},
		{"odd lead", Config{LeadSilence: 7 * time.Millisecond}, 320, 112, 16112},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, err := NewFile("mic", path, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			col, _, err := play(t, src)
			if err != nil {
				t.Fatal(err)
			}
			checkStream(t, col.frames, tc.frameLen)
			got := col.samples()
			if len(got) != tc.total {
				t.Fatalf("played %d samples, want %d", len(got), tc.total)
			}
			for i := 0; i < tc.lead; i++ {
				if got[i] != 0 {
					t.Fatalf("lead silence sample %d = %v", i, got[i])
				}
			}
			if tc.cfg.TailSilence > 0 {
				tail := int(audio.DurationToSamples(tc.cfg.TailSilence, audio.PipelineRate))
				if rms := audio.RMS(got[len(got)-tail:]); rms != 0 {
					t.Fatalf("tail silence has RMS %v", rms)
				}
			}
			// The recording sits right after the lead, in phase with the original.
			direct, _ := audio.ToPipeline(content)
			body := got[tc.lead : tc.lead+len(direct.Samples)]
			if lag := peakLag(body, direct.Samples, 20); lag != 0 {
				t.Errorf("recording is offset by %d samples", lag)
			}
		})
	}
}

func TestFileLoop(t *testing.T) {
	content := tone(16000, 1, 100*time.Millisecond, 500, 0.5)
	path := writeWAV(t, "loop.wav", content, 16)
	src, err := NewFile("mic", path, Config{Loop: true, TailSilence: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewVirtual(virtualStart)
	defer clk.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	col := &collector{stopAfter: 40, stop: cancel} // 800 ms: more than five passes
	net := iu.NewNetwork(iu.WithClock(clk))
	net.Add(src, col)
	net.Connect(src, col)
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	checkStream(t, col.frames, 320)
	got := col.samples()
	if len(got) < 40*320 {
		t.Fatalf("looping source stopped after %d samples", len(got))
	}
	// Each pass is 1600 samples of tone and 800 of silence.
	for pass := 0; pass < 5; pass++ {
		p := got[pass*2400 : (pass+1)*2400]
		if audio.RMS(p[:1600]) < 0.3 || audio.RMS(p[1600:]) != 0 {
			t.Fatalf("pass %d: tone RMS %.3f, tail RMS %.3f", pass, audio.RMS(p[:1600]), audio.RMS(p[1600:]))
		}
	}
}

func TestNewFileRejects(t *testing.T) {
	dir := t.TempDir()
	good := writeWAV(t, "good.wav", tone(16000, 1, 100*time.Millisecond, 440, 0.5), 16)
	goodBytes, _ := os.ReadFile(good)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := audio.Frame{Rate: 16000, Channels: 1}
	emptyPath := writeWAV(t, "empty.wav", empty, 16)
	tests := []struct {
		name    string
		path    string
		wantErr error
	}{
		{"missing", filepath.Join(dir, "nope.wav"), os.ErrNotExist},
		{"not a WAV", write("text.wav", []byte("just some text, not audio at all")), audio.ErrNotWAV},
		{"truncated", write("cut.wav", goodBytes[:len(goodBytes)/2]), audio.ErrTruncated},
		{"zero-length file", write("zero.wav", nil), audio.ErrNotWAV},
		{"no samples", emptyPath, audio.ErrEmptyAudio},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewFile("mic", tc.path, Config{})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			// With OnError skip the source is built, and plays its silence only.
			src, err := NewFile("mic", tc.path, Config{OnError: OnErrorSkip, TailSilence: 100 * time.Millisecond})
			if err != nil {
				t.Fatalf("skip mode: %v", err)
			}
			col, _, err := play(t, src)
			if err != nil {
				t.Fatalf("skip mode run: %v", err)
			}
			// What could be decoded plays, then the tail.
			want := 1600
			if errors.Is(tc.wantErr, audio.ErrTruncated) {
				want += (len(goodBytes)/2 - 44) / 2
			}
			got := col.samples()
			if len(got) != want || audio.RMS(got[len(got)-1600:]) != 0 {
				t.Fatalf("skip mode played %d samples (tail RMS %v), want %d ending in 1600 of silence", len(got), audio.RMS(got[len(got)-1600:]), want)
			}
		})
	}
	configs := []Config{
		{FrameDuration: -time.Millisecond},
		{FrameDuration: time.Microsecond},
		{FrameDuration: time.Minute},
		{LeadSilence: -1},
		{TailSilence: -1},
		{Pacing: "fast"},
		{OnError: "ignore"},
		{Quality: audio.Quality(99)},
	}
	for _, cfg := range configs {
		if _, err := NewFile("mic", good, cfg); err == nil {
			t.Errorf("NewFile accepted config %+v", cfg)
		}
	}
	for _, name := range []string{"", "a/b"} {
		if _, err := NewFile(name, good, Config{}); err == nil {
			t.Errorf("NewFile accepted module name %q", name)
		}
	}
}

// TestFileBrokenWhilePlaying covers damage found only while streaming: a streamed WAV
// (no sizes in its header) that ends in the middle of a sample frame.
func TestFileBrokenWhilePlaying(t *testing.T) {
	dir := t.TempDir()
	var buf []byte
	w, err := audio.NewWAVWriter(byteWriter{&buf}, 16000, 2, 16)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(tone(16000, 2, 300*time.Millisecond, 440, 0.5))
	w.Close()
	path := filepath.Join(dir, "cut.wav")
	os.WriteFile(path, buf[:len(buf)-1], 0o644)

	src, err := NewFile("mic", path, Config{})
	if err != nil {
		t.Fatalf("the header is fine, NewFile should accept it: %v", err)
	}
	_, _, err = play(t, src)
	var me *iu.ModuleError
	if !errors.As(err, &me) || me.Module != "mic" || !errors.Is(err, audio.ErrTruncated) {
		t.Fatalf("network error = %v, want the source's ErrTruncated", err)
	}

	core, logs := observer.New(zapcore.WarnLevel)
	src, err = NewFile("mic", path, Config{OnError: OnErrorSkip, TailSilence: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	col, _, err := play(t, src, iu.WithLogger(zap.New(core)))
	if err != nil {
		t.Fatalf("skip mode: %v", err)
	}
	if got := len(col.samples()); got < 4700 || got > 4800+1600 {
		t.Fatalf("skip mode played %d samples, want the decodable ~300 ms plus 100 ms of tail", got)
	}
	if logs.FilterMessageSnippet("broken").Len() == 0 {
		t.Fatalf("skip mode logged nothing about the broken file: %v", logs.All())
	}
}

type byteWriter struct{ b *[]byte }

func (w byteWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }

// TestFileStopsWithNetwork: cancelling the network's context stops a long paced
// source promptly on the real clock.
func TestFileStopsWithNetwork(t *testing.T) {
	path := writeWAV(t, "long.wav", tone(16000, 1, 60*time.Second, 440, 0.3), 16)
	src, err := NewFile("mic", path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	col := &collector{stopAfter: 3, stop: cancel}
	net := iu.NewNetwork()
	net.Add(src, col)
	net.Connect(src, col)
	done := make(chan error, 1)
	go func() { done <- net.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("network did not stop")
	}
	// The stop is prompt: a handful of frames, not the file's 3000 (how many exactly
	// depends on how busy the machine is).
	if len(col.frames) < 3 || len(col.frames) > 500 {
		t.Fatalf("got %d frames before the stop", len(col.frames))
	}
}

// TestFileStreamBoundedMemory reads a long file through the file stream and checks that
// its buffers stay at a block's size rather than the file's.
func TestFileStreamBoundedMemory(t *testing.T) {
	path := writeWAV(t, "long.wav", tone(48000, 2, 20*time.Second, 440, 0.3), 16)
	s, err := openFileStream(path, audio.QualityDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dst := make([]float32, 320)
	var total int
	for {
		n, err := s.Read(dst)
		total += n
		if cap(s.pending) > 4*readChunkFrames {
			t.Fatalf("pending buffer grew to %d samples", cap(s.pending))
		}
		if err != nil {
			break
		}
	}
	if total != 20*16000 {
		t.Fatalf("read %d samples, want %d", total, 20*16000)
	}
}
