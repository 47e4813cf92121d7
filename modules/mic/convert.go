package mic

import "github.com/parley-voice/parley/audio"

// converter turns capture blocks into pipeline samples and keeps their positions: the
// stretch of capture since the last gap goes through one resampler stream, whose output
// sample j lies at device frame p0 + j·down/up, that is at pipeline position
// base + ⌈p0·up/down⌉ + j.
type converter struct {
	rate     int
	quality  audio.Quality
	rs       *audio.Resampler // nil when the device runs at the pipeline rate
	up, down int64
	// base is the pipeline position of device frame 0 of the current capture (it moves
	// when a lost device is reopened).
	base    int64
	next    int64 // device frame expected next
	started bool
	scratch []float32
}

func newConverter(rate int, q audio.Quality) (*converter, error) {
	g := gcd(rate, audio.PipelineRate)
	c := &converter{rate: rate, quality: q, up: int64(audio.PipelineRate / g), down: int64(rate / g)}
	if rate != audio.PipelineRate {
		rs, err := audio.NewResampler(rate, audio.PipelineRate, 1, q)
		if err != nil {
			return nil, err
		}
		c.rs = rs
	}
	return c, nil
}

// mono down-mixes interleaved samples into a scratch buffer the converter owns.
func (c *converter) mono(in []float32, channels int) []float32 {
	if channels == 1 {
		return in
	}
	n := len(in) / channels
	if cap(c.scratch) < n {
		c.scratch = make([]float32, n)
	}
	out := c.scratch[:n]
	scale := 1 / float32(channels)
	for i := range out {
		var sum float32
		for _, v := range in[i*channels : (i+1)*channels] {
			sum += v
		}
		out[i] = sum * scale
	}
	return out
}

// gap reports whether a block starting at device frame pos does not follow the
// previous one (audio was dropped in between).
func (c *converter) gap(pos int64) bool { return c.started && pos != c.next }

// begin starts a resampler stream at device frame pos and returns the pipeline position
// of its first output sample.
func (c *converter) begin(pos int64) int64 {
	c.started = true
	c.next = pos
	return c.position(pos)
}

// position returns the pipeline position of device frame pos of the current capture.
func (c *converter) position(pos int64) int64 { return c.base + ceilDiv(pos*c.up, c.down) }

// process converts mono device frames that continue the current stream. The result is
// a new slice.
func (c *converter) process(in []float32) []float32 {
	c.next += int64(len(in))
	if c.rs == nil {
		return append([]float32(nil), in...)
	}
	return c.rs.Process(in)
}

// flush releases what the resampler holds back and ends its stream.
func (c *converter) flush() []float32 {
	c.started = false
	if c.rs == nil {
		return nil
	}
	return c.rs.Flush()
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
