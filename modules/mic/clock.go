package mic

import (
	"time"

	"github.com/parley-voice/parley/audio"
)

// clockWindow is how far back captureClock looks: long enough to hold a stamp that was
// on time, short enough to follow the slow drift between the device's clock and the
// system's (100 ppm is 1 ms in 10 s).
const clockWindow = 10 * time.Second

// captureClock estimates when a capture's pipeline position 0 was captured (its epoch)
// from the stamps of its blocks (when each block's first sample was captured, as the
// callback saw it). A stamp is never early but often late: a callback that comes late
// (a loaded machine, a sound server delivering in bursts) stamps its block when it runs.
// So the estimate is the earliest epoch the stamps of the last clockWindow give. It is
// owned by the module's goroutine.
type captureClock struct {
	earliest audio.Earliest
}

func newCaptureClock() captureClock {
	return captureClock{earliest: audio.Earliest{Window: clockWindow}}
}

// add notes that pipeline position pos was captured at stamp.
func (c *captureClock) add(stamp time.Duration, pos int64) {
	c.earliest.Note(stamp, stamp-audio.SamplesToDuration(pos, audio.PipelineRate))
}

// epoch returns the estimate, and false before the first stamp.
func (c *captureClock) epoch() (time.Duration, bool) { return c.earliest.Min() }

// reset forgets the stamps (a new capture has a clock of its own).
func (c *captureClock) reset() { c.earliest.Reset() }
