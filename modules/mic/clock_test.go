package mic

import (
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
)

// TestCaptureClock: late stamps (delayed callbacks, bursts) do not move the estimate; a
// stamp on time does, and one older than the window is forgotten, so that a slow drift
// is followed.
func TestCaptureClock(t *testing.T) {
	c := newCaptureClock()
	if _, ok := c.epoch(); ok {
		t.Fatal("an epoch before any stamp")
	}
	const epoch = 500 * time.Millisecond
	block := int64(160) // 10 ms blocks
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	for i := range int64(300) {
		late := ms((i * 37) % 90) // callbacks up to 90 ms late
		if i%50 == 0 {
			late = 0 // now and then one on time
		}
		if i >= 100 && i < 130 {
			late = ms(300) // a burst
		}
		c.add(epoch+audio.SamplesToDuration(i*block, audio.PipelineRate)+late, i*block)
		if e, _ := c.epoch(); e != epoch {
			t.Fatalf("block %d: epoch %v, want %v", i, e, epoch)
		}
	}
	// The device's clock runs 1 ms slower than the system's from now on: after the
	// window, the estimate follows.
	for i := int64(300); i < 1500; i++ {
		c.add(epoch+ms(1)+audio.SamplesToDuration(i*block, audio.PipelineRate), i*block)
	}
	if e, _ := c.epoch(); e != epoch+ms(1) {
		t.Fatalf("epoch %v after the drift, want %v", e, epoch+ms(1))
	}
	if n := c.earliest.Len(); n > 1100 {
		t.Errorf("the window holds %d stamps", n)
	}
	c.reset()
	if _, ok := c.epoch(); ok {
		t.Fatal("an epoch after reset")
	}
}
