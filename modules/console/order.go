package console

import (
	"cmp"
	"slices"
	"time"
)

// lineOrder keeps finished lines until no line still in progress comes before them, so
// that the console prints its lines in the order of the times they show. A user's line
// that ends while the agent is still speaking, for example, started after the agent's
// turn, whose line is printed only when the turn ends. It is pure: the console module
// says which lines are in progress and when they started.
type lineOrder struct {
	held []timedLine
}

type timedLine struct {
	at   time.Duration
	text string
}

// add holds a finished line that shows time at.
func (o *lineOrder) add(at time.Duration, text string) {
	o.held = append(o.held, timedLine{at: at, text: text})
}

// release returns, in time order, the held lines that start no later than every line
// still in progress (whose start times are pending); with none pending, all of them.
func (o *lineOrder) release(pending ...time.Duration) []string {
	if len(o.held) == 0 {
		return nil
	}
	slices.SortStableFunc(o.held, func(a, b timedLine) int { return cmp.Compare(a.at, b.at) })
	n := len(o.held)
	if len(pending) > 0 {
		horizon := slices.Min(pending)
		n = 0
		for n < len(o.held) && o.held[n].at <= horizon {
			n++
		}
	}
	out := make([]string, n)
	for i, l := range o.held[:n] {
		out[i] = l.text
	}
	o.held = slices.Delete(o.held, 0, n)
	return out
}
