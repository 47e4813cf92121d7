// Package audio holds the pipeline's common audio currency (Frame, the payload of audio
// IUs) and the pure-Go audio tools around it: WAV files, resampling and mixing.
package audio

import (
	"fmt"
	"time"
)

// PipelineRate is the sample rate every module after the sources works at.
const PipelineRate = 16000

// DefaultFrameDuration is how much audio one audio IU carries unless configured
// otherwise (a recording's source, a microphone, the agent's audio.frame).
const DefaultFrameDuration = 20 * time.Millisecond

// MaxGap is the longest stretch of missing audio, in samples at PipelineRate, that a
// module reading a stream bridges as lost audio (a dropped capture block) by filling it
// with silence; a longer jump in stream positions is not filled (the VAD takes it for a
// new stream).
const MaxGap = 5 * PipelineRate

// Frame is a block of PCM audio and the payload of audio IUs. Samples are float32 in
// [-1, 1], interleaved when Channels > 1. Start is the position of the first sample in its
// stream, counted in sample frames (one sample per channel) at Rate, so that any module
// can tell where in the stream a frame lies after resampling.
//
// Like every payload, a Frame must not be modified after it was sent.
type Frame struct {
	Samples  []float32
	Rate     int
	Channels int
	Start    int64
	// Captured is when the first sample was captured, on the network's clock, for
	// inputs that know it (the microphone stamps its frames with the device's capture
	// time). It is zero for recordings: their stream positions are their only clock
	// (a replay's sample s is spoken s/Rate after the network started).
	Captured time.Time
}

// Kind implements iu.Payload.
func (f Frame) Kind() string { return "audio" }

// Summary implements iu.Payload.
func (f Frame) Summary() string {
	return fmt.Sprintf("%d Hz x%d @%d +%d", f.Rate, f.Channels, f.Start, f.Len())
}

// Len returns the number of sample frames (samples per channel).
func (f Frame) Len() int {
	if f.Channels <= 0 {
		return 0
	}
	return len(f.Samples) / f.Channels
}

// End returns the stream position just after the frame.
func (f Frame) End() int64 { return f.Start + int64(f.Len()) }

// SameStretch reports whether g covers the same stretch of the stream as f: the same
// start and length (an echo canceller's linear output beside the cleaned frame).
func (f Frame) SameStretch(g Frame) bool { return f.Start == g.Start && f.Len() == g.Len() }

// Duration returns how long the frame plays.
func (f Frame) Duration() time.Duration { return SamplesToDuration(int64(f.Len()), f.Rate) }

// StartTime returns the frame's position in its stream as a duration.
func (f Frame) StartTime() time.Duration { return SamplesToDuration(f.Start, f.Rate) }

// SamplesToDuration converts a sample count at rate into a duration.
func SamplesToDuration(n int64, rate int) time.Duration {
	if rate <= 0 {
		return 0
	}
	return time.Duration(n * int64(time.Second) / int64(rate))
}

// DurationToSamples converts a duration into a sample count at rate (rounded down).
func DurationToSamples(d time.Duration, rate int) int64 {
	return int64(d) * int64(rate) / int64(time.Second)
}

// EndOfStream is the payload that ends an audio stream (kind "eos"): no audio follows
// position Pos (samples at Rate). A source sends it after its last frame; the VAD passes
// it on once it has flushed, so that modules further on learn that the input is over
// even though, in a network with cycles, their own input may never end.
type EndOfStream struct {
	Pos  int64
	Rate int
}

// Kind implements iu.Payload.
func (EndOfStream) Kind() string { return "eos" }

// Summary implements iu.Payload.
func (e EndOfStream) Summary() string {
	return fmt.Sprintf("end of stream at %.3fs", SamplesToDuration(e.Pos, e.Rate).Seconds())
}

// End returns the stream's length as a duration.
func (e EndOfStream) End() time.Duration { return SamplesToDuration(e.Pos, e.Rate) }
