package speaker

import (
	"fmt"
	"time"

	"github.com/parley-voice/parley/audio"
)

// Played is the payload of the speaker's played-audio IUs (kind "played"), which the
// module sends when Options.Played is set: everything its output played, the agent's
// audio and the silence around it, in order and without gaps, as the far-end reference
// an echo canceller needs. The output's renderer copies every sample it outputs into a
// lock-free tap (see Ring); the module drains the tap at every wake (every Step, also
// while idle), resamples it to 16 kHz and sends it. ADD+COMMIT in one batch.
type Played struct {
	// Audio is 16 kHz mono. Audio.Start counts samples of the played stream at 16 kHz
	// from the output's first frame: consecutive IUs continue one another, except
	// after a loss (Lost).
	Audio audio.Frame
	// Heard is when Audio's first sample reaches the listener, on the network's clock:
	// the output's own timing (Output.FrameTime), so the output latency is in it. For
	// the file output it is exact: the module's start + OutputLatency + Start/16000 s.
	Heard time.Time
	// Lost is how many samples (at 16 kHz) of the played stream were lost just before
	// Audio because the module fell behind its output by more than the tap holds (two
	// seconds); Audio.Start has skipped them.
	Lost int64
}

// Kind implements iu.Payload.
func (Played) Kind() string { return "played" }

// Summary implements iu.Payload.
func (p Played) Summary() string {
	s := fmt.Sprintf("played @%d +%d", p.Audio.Start, p.Audio.Len())
	if p.Lost > 0 {
		s += fmt.Sprintf(" after %d lost", p.Lost)
	}
	return s
}

// tapSeconds is how much played audio the tap holds for the module: the longest stall
// of the module that loses nothing.
const tapSeconds = 2

// tapReader is the writer side of the ring's tap (see Ring): it drains what the renderer
// played and turns it into Played payloads at 16 kHz. Only the module's goroutine
// touches it.
type tapReader struct {
	ring    *Ring
	out     Output
	rate    int
	quality audio.Quality

	pos   int64  // next tap position to read (published to the renderer as ring.tapR)
	frame int64  // the device frame at pos
	marks uint64 // marks consumed (published as ring.markR)
	// The current resampler stream: it started at device frame base, which is 16 kHz
	// position pos0, and has emitted emitted samples since.
	rs      *audio.Resampler // nil when the output runs at 16 kHz
	base    int64
	pos0    int64
	emitted int64
	lost    int64 // 16 kHz samples lost before the next payload
	buf     []float32
}

func newTapReader(ring *Ring, out Output, quality audio.Quality) (*tapReader, error) {
	t := &tapReader{ring: ring, out: out, rate: out.Rate(), quality: quality}
	if err := t.restart(0); err != nil {
		return nil, err
	}
	return t, nil
}

// restart begins a resampler stream at device frame f.
func (t *tapReader) restart(f int64) error {
	t.base, t.pos0, t.emitted = f, ceilDiv(f*audio.PipelineRate, int64(t.rate)), 0
	t.rs = nil
	if t.rate != audio.PipelineRate {
		rs, err := audio.NewResampler(t.rate, audio.PipelineRate, 1, t.quality)
		if err != nil {
			return fmt.Errorf("speaker: played audio: %w", err)
		}
		t.rs = rs
	}
	return nil
}

// drain returns what the output played since the last drain (nothing when it played
// nothing new); with last, also what the resampler still holds.
func (t *tapReader) drain(last bool) ([]Played, error) {
	l := t.ring
	w := l.tapW.Load()
	mw := l.markW.Load() // marks for positions below w were published before w
	var res []Played
	for t.pos < w {
		end := w
		if t.marks < mw {
			if m := l.marks[t.marks%markSlots]; m.pos == t.pos {
				// Frames were lost before this position: end the stream there and
				// start again at the frame the position holds.
				res = t.emit(res, nil, true)
				before := t.pos0 + t.emitted
				if err := t.restart(m.frame); err != nil {
					return res, err
				}
				t.lost += t.pos0 - before
				t.frame = m.frame
				t.marks++
				l.markR.Store(t.marks)
				continue
			} else if m.pos < end {
				end = m.pos
			}
		}
		t.buf = t.buf[:0]
		for i := t.pos; i < end; i++ {
			t.buf = append(t.buf, l.tap[i&l.tapMask])
		}
		res = t.emit(res, t.buf, false)
		t.frame += end - t.pos
		t.pos = end
	}
	l.tapR.Store(t.pos) // the slots read are the renderer's again
	if last {
		res = t.emit(res, nil, true)
	}
	return res, nil
}

// emit resamples samples (the device frames that continue the stream) and appends the
// payload they make; flush also releases what the resampler holds back.
func (t *tapReader) emit(res []Played, samples []float32, flush bool) []Played {
	var out []float32
	if t.rs == nil {
		out = append([]float32(nil), samples...)
	} else {
		if len(samples) > 0 {
			out = t.rs.Process(samples)
		}
		if flush {
			out = append(out, t.rs.Flush()...)
		}
	}
	if len(out) == 0 {
		return res
	}
	start := t.pos0 + t.emitted
	t.emitted += int64(len(out))
	p := Played{
		Audio: audio.Frame{Samples: out, Rate: audio.PipelineRate, Channels: 1, Start: start},
		Heard: t.out.FrameTime(0).Add(audio.SamplesToDuration(start, audio.PipelineRate)),
		Lost:  t.lost,
	}
	t.lost = 0
	return append(res, p)
}

// PlayedAudio returns the audio and when the listener heard its first sample: what
// consumers of played audio (the echo canceller, the laptop simulator) ask for.
func (p Played) PlayedAudio() (audio.Frame, time.Time) { return p.Audio, p.Heard }
