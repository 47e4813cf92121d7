package bench

import (
	"sync"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/metrics"
	"github.com/parley-voice/parley/modules/manager"
	"github.com/parley-voice/parley/modules/speaker"
)

// deviceProbe watches the live network's IUs for the device timing: when the
// microphone's frames were captured and when they arrived, where the speaker's output
// timeline began, and how long the speaker's tails lasted. Observe runs on every
// sending module's goroutine.
type deviceProbe struct {
	mu sync.Mutex
	// micEpoch is the earliest capture time of the microphone's stream position 0
	// (the mic's own capture clock, a sliding minimum, stamps the frames).
	micEpoch time.Time
	// outputStart is the earliest estimate of the speaker's output timeline start: a
	// Playing report's Pos is "now" on that timeline, sent at most a little later.
	outputStart  time.Time
	captureDelay []time.Duration
	// tails are the speaker's pause and stop reports with a tail: when they were sent
	// and when the tail ends on the output timeline.
	tails []tailReport
	// answering holds the agent turns under way (the manager's agent-turn IUs added
	// and not yet committed); quiet are closed when it empties.
	answering    map[int]struct{}
	quietWaiters []chan struct{}
}

// quiet returns a channel closed once no agent turn is under way.
func (d *deviceProbe) quiet() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch := make(chan struct{})
	if len(d.answering) == 0 {
		close(ch)
	} else {
		d.quietWaiters = append(d.quietWaiters, ch)
	}
	return ch
}

type tailReport struct {
	at  time.Time
	end time.Duration
}

// Observe implements iu.Observer.
func (d *deviceProbe) Observe(at time.Time, m iu.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, up := range m.Updates {
		if rec, ok := up.IU.Payload.(manager.AgentTurn); ok {
			// The manager's agent-turn IU: ADDed when it asks for a turn, COMMITted when
			// the turn is over.
			switch up.Type {
			case iu.Add:
				d.startTurn(rec.TurnID)
			case iu.Commit:
				d.endTurn(rec.TurnID)
			}
			continue
		}
		if up.Type != iu.Add {
			continue
		}
		switch pl := up.IU.Payload.(type) {
		case audio.Frame:
			// The microphone's own frames: what the echo canceller makes of them is
			// grounded in them.
			if len(up.IU.GroundedIn) > 0 || pl.Captured.IsZero() || pl.Rate <= 0 {
				continue
			}
			epoch := pl.Captured.Add(-audio.SamplesToDuration(pl.Start, pl.Rate))
			if d.micEpoch.IsZero() || epoch.Before(d.micEpoch) {
				d.micEpoch = epoch
			}
			d.captureDelay = append(d.captureDelay, at.Sub(pl.Captured.Add(pl.Duration())))
		case speaker.Progress:
			switch {
			case pl.State == speaker.Playing && !pl.Tail:
				if start := at.Add(-pl.Pos); d.outputStart.IsZero() || start.Before(d.outputStart) {
					d.outputStart = start
				}
			case (pl.State == speaker.Paused || pl.State == speaker.Stopped) && pl.Tail:
				d.tails = append(d.tails, tailReport{at: at, end: pl.Pos})
			}
		}
	}
}

func (d *deviceProbe) startTurn(id int) {
	if d.answering == nil {
		d.answering = map[int]struct{}{}
	}
	d.answering[id] = struct{}{}
}

// endTurn notes that agent turn id is over, and wakes those waiting for quiet when no
// turn is under way.
func (d *deviceProbe) endTurn(id int) {
	delete(d.answering, id)
	if len(d.answering) == 0 {
		for _, ch := range d.quietWaiters {
			close(ch)
		}
		d.quietWaiters = nil
	}
}

// fill writes what the probe saw into devices.
func (d *deviceProbe) fill(devices *LiveDevices) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.captureDelay) > 0 {
		devices.CaptureDelay = metrics.Of(d.captureDelay)
	}
	if d.outputStart.IsZero() {
		return
	}
	if !d.micEpoch.IsZero() {
		devices.TimelineSkew = d.micEpoch.Sub(d.outputStart)
	}
	var tails []time.Duration
	for _, t := range d.tails {
		// The tail ends at end on the output timeline; the report was sent at at.
		if tail := d.outputStart.Add(t.end).Sub(t.at); tail >= 0 {
			tails = append(tails, tail)
		}
	}
	if len(tails) > 0 {
		devices.OutputTail = metrics.Of(tails)
	}
}
