// Package plot draws a recorded timeline (iu.TimelineEntry lines) as an SVG picture of
// IUs per module over time, in the manner of retico's plots: one row per module, one bar
// per IU from its ADD to its COMMIT or REVOKE, labelled with its payload.
package plot

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/parley-voice/parley/internal/ellipsis"
	"github.com/parley-voice/parley/iu"
)

// Options tune the picture.
type Options struct {
	// Width of the plotting area in pixels (default 1400).
	Width int
	// From and To limit the time range in seconds (both zero: everything).
	From, To float64
	// Dense lists payload kinds drawn as merged activity spans instead of one bar per IU
	// (audio frames, progress reports and the speaker's played audio are far too many to
	// label); default "audio", "progress", "played".
	Dense []string
}

// span is one IU's life on the timeline.
type span struct {
	start, end float64
	label      string
	state      iu.State
	kind       string
	lane       int
}

// Drawing is a plot being built from a timeline's entries, one at a time: it keeps one
// span per IU and merges the updates of dense kinds as they come, so what it holds
// grows with the IUs it draws, not with the number of updates (a session's audio
// frames) or the length of the session.
type Drawing struct {
	opt   Options
	dense map[string]bool
	rows  map[string][]span
	order []string      // modules in order of first appearance
	open  map[iu.ID]int // IU → index of its span in rows[module]
	// denseOpen is, per module and dense kind, the span that its next update may extend.
	denseOpen  map[string]int
	tMin, tMax float64
	updates    int
}

// NewDrawing starts an empty plot.
func NewDrawing(opt Options) *Drawing {
	if opt.Width <= 0 {
		opt.Width = 1400
	}
	if opt.Dense == nil {
		opt.Dense = []string{"audio", "progress", "played"}
	}
	d := &Drawing{opt: opt, dense: map[string]bool{}, rows: map[string][]span{}, open: map[iu.ID]int{},
		denseOpen: map[string]int{}, tMin: math.Inf(1), tMax: math.Inf(-1)}
	for _, k := range opt.Dense {
		d.dense[k] = true
	}
	return d
}

// SVG writes the timeline entries as an SVG document.
func SVG(w io.Writer, entries []iu.TimelineEntry, opt Options) error {
	d := NewDrawing(opt)
	for _, e := range entries {
		d.Add(e)
	}
	return d.WriteSVG(w)
}

// SVGFrom draws the timeline r holds (JSON lines, as iu.Timeline writes them) as it
// reads it, and returns how many updates it read. It never holds the whole timeline.
func SVGFrom(w io.Writer, r io.Reader, opt Options) (int, error) {
	d := NewDrawing(opt)
	err := iu.ScanTimeline(r, func(e iu.TimelineEntry) error {
		d.Add(e)
		return nil
	})
	if err != nil {
		return d.updates, err
	}
	return d.updates, d.WriteSVG(w)
}

// Updates returns how many updates the drawing was given.
func (d *Drawing) Updates() int { return d.updates }

// densePause is how long a dense kind may fall silent and still be drawn as one span.
const densePause = 0.25

// Add draws one update; updates must come in the order the timeline holds them.
func (d *Drawing) Add(e iu.TimelineEntry) {
	d.updates++
	d.tMin = math.Min(d.tMin, e.T)
	d.tMax = math.Max(d.tMax, e.T)
	if _, ok := d.rows[e.Module]; !ok {
		d.rows[e.Module] = nil
		d.order = append(d.order, e.Module)
	}
	spans := d.rows[e.Module]
	if d.dense[e.Kind] {
		key := e.Module + "\x00" + e.Kind
		if i, ok := d.denseOpen[key]; ok && e.T-spans[i].end <= densePause {
			spans[i].end = math.Max(spans[i].end, e.T)
			return
		}
		d.rows[e.Module] = append(spans, span{start: e.T, end: e.T, kind: e.Kind, label: e.Kind, state: iu.Committed})
		d.denseOpen[key] = len(spans)
		return
	}
	switch e.Type {
	case iu.Add:
		// An IU that is still open at the end is drawn to the end (WriteSVG).
		d.rows[e.Module] = append(spans, span{start: e.T, label: e.Payload, kind: e.Kind, state: iu.Open})
		d.open[e.IU] = len(spans)
	case iu.UpdatePayload:
		if i, ok := d.open[e.IU]; ok {
			spans[i].label = e.Payload
		}
	case iu.Commit, iu.Revoke:
		if i, ok := d.open[e.IU]; ok {
			s := &spans[i]
			if e.T > s.start {
				s.end = e.T
			} else if e.Type == iu.Commit {
				// ADD and COMMIT together: the IU is final at once; draw it until the
				// module's next IU replaces it (WriteSVG) or as a thin mark.
				s.end = s.start
			}
			s.state = iu.Committed
			if e.Type == iu.Revoke {
				s.state = iu.Revoked
				s.end = math.Max(e.T, s.start)
			}
			delete(d.open, e.IU)
		}
	}
}

// WriteSVG writes the plot of everything added so far as an SVG document.
func (d *Drawing) WriteSVG(w io.Writer) error {
	opt := d.opt
	if d.updates == 0 {
		return fmt.Errorf("plot: the timeline is empty")
	}
	tMin, tMax := d.tMin, d.tMax
	if opt.From != 0 || opt.To != 0 {
		tMin, tMax = opt.From, opt.To
	}
	if tMax <= tMin {
		tMax = tMin + 1
	}
	dense := d.dense
	rows, order := d.finishSpans(tMax), d.order
	const (
		left     = 130
		laneH    = 16
		rowPad   = 8
		top      = 46 // title and legend above the rows
		axisH    = 24
		fontSize = 10
	)
	x := func(t float64) float64 { return left + (t-tMin)/(tMax-tMin)*float64(opt.Width) }
	rowY := make(map[string]int, len(order))
	y := top
	for _, m := range order {
		rowY[m] = y
		lanes := 1
		for _, s := range rows[m] {
			lanes = max(lanes, s.lane+1)
		}
		y += lanes*laneH + rowPad
	}
	height := y + axisH
	totalW := left + opt.Width + 20

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="%d">`+"\n", totalW, height, fontSize)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">IU timeline, %.2f–%.2f s</text>`+"\n", left, tMin, tMax)
	// The legend: what the colours of the bars mean.
	lx := left
	for _, l := range legend(dense) {
		fmt.Fprintf(&b, `<rect x="%d" y="26" width="14" height="10" fill="%s" stroke="#666" stroke-width="0.4"/><text x="%d" y="35" fill="#333">%s</text>`+"\n",
			lx, l.fill, lx+18, html.EscapeString(l.text))
		lx += 18 + int(math.Ceil(labelWidth(l.text))) + 16
	}
	// Time axis with a tick every "nice" step.
	step := niceStep((tMax - tMin) / 12)
	for t := math.Ceil(tMin/step) * step; t <= tMax; t += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", x(t), top-4, x(t), height-axisH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%.4gs</text>`+"\n", x(t), height-8, t)
	}
	for _, m := range order {
		ry := rowY[m]
		// A module name too long for the margin is shortened; its title shows it whole.
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" font-weight="bold"><title>%s</title>%s</text>`+"\n",
			left-8, ry+12, html.EscapeString(m), html.EscapeString(fitLabel(m, left-12, boldCharWidth)))
		for _, s := range rows[m] {
			if s.end < tMin || s.start > tMax {
				continue
			}
			x0, x1 := x(math.Max(s.start, tMin)), x(math.Min(s.end, tMax))
			w := math.Max(x1-x0, 1.5)
			sy := ry + s.lane*laneH
			fill := stateFill[s.state]
			if dense[s.kind] {
				fill = denseFill
			}
			fmt.Fprintf(&b, `<g><title>%s</title><rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" stroke="#666" stroke-width="0.4"/>`,
				html.EscapeString(fmt.Sprintf("%s %.3f–%.3f s: %s", s.kind, s.start, s.end, s.label)), x0, sy, w, laneH-3, fill)
			// The label is cut to what fits in the bar (the title shows it whole on hover).
			if label := fitLabel(s.label, w-4, charWidth); label != "" {
				fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`, x0+2, sy+fontSize, html.EscapeString(label))
			}
			b.WriteString("</g>\n")
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// finishSpans returns the drawing's spans per module ready to draw: IUs still open end
// at tEnd, IUs final the moment they were added reach to their module's next one, and
// overlapping spans are stacked in lanes.
func (d *Drawing) finishSpans(tEnd float64) map[string][]span {
	rows := make(map[string][]span, len(d.rows))
	for m, drawn := range d.rows {
		spans := slices.Clone(drawn)
		for i := range spans {
			if spans[i].state == iu.Open && !d.dense[spans[i].kind] {
				spans[i].end = tEnd
			}
		}
		// IUs that became final the moment they were added (clauses, chunks, utterances)
		// are drawn until the module's next IU of the same kind starts, which reads like
		// retico's plots.
		for i := range spans {
			if spans[i].end == spans[i].start && !d.dense[spans[i].kind] {
				for j := i + 1; j < len(spans); j++ {
					if spans[j].kind == spans[i].kind {
						spans[i].end = math.Min(spans[j].start, spans[i].start+2)
						break
					}
				}
			}
		}
		sort.SliceStable(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
		assignLanes(spans)
		rows[m] = spans
	}
	return rows
}

// assignLanes stacks overlapping spans into lanes (at most 4; more overlap shares).
func assignLanes(spans []span) {
	var laneEnd []float64
	for i := range spans {
		placed := false
		for l, end := range laneEnd {
			if spans[i].start >= end {
				spans[i].lane = l
				laneEnd[l] = spans[i].end
				placed = true
				break
			}
		}
		if !placed {
			if len(laneEnd) < 4 {
				spans[i].lane = len(laneEnd)
				laneEnd = append(laneEnd, spans[i].end)
			} else {
				spans[i].lane = i % 4
				laneEnd[i%4] = math.Max(laneEnd[i%4], spans[i].end)
			}
		}
	}
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*exp {
			return m * exp
		}
	}
	return 10 * exp
}

// Bar colours by IU state, and for merged activity spans.
var stateFill = map[iu.State]string{iu.Committed: "#9fd4a3", iu.Revoked: "#f0a3a3", iu.Open: "#cfd8e3"}

const denseFill = "#b9c9ee"

type legendItem struct{ fill, text string }

// legend lists the colours the plot uses.
func legend(dense map[string]bool) []legendItem {
	items := []legendItem{
		{stateFill[iu.Committed], "committed"},
		{stateFill[iu.Revoked], "revoked"},
		{stateFill[iu.Open], "open (not yet committed)"},
	}
	if len(dense) > 0 {
		kinds := make([]string, 0, len(dense))
		for k := range dense {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		items = append(items, legendItem{denseFill, strings.Join(kinds, ", ") + " (merged activity)"})
	}
	return items
}

// Widths of a character of the 10-pixel sans-serif labels, generous enough for wide
// letters, so that a label measured with them stays inside its bar.
const (
	charWidth     = 6.0
	boldCharWidth = 7.0
)

// labelWidth is the width a label of the plot's font takes at most.
func labelWidth(s string) float64 { return float64(utf8.RuneCountInString(s)) * charWidth }

// fitLabel shortens s, ellipsis included, to fit width pixels at perChar pixels a
// character; it returns "" when not even one character and the ellipsis fit.
func fitLabel(s string, width, perChar float64) string {
	n := int(width / perChar)
	switch {
	case utf8.RuneCountInString(s) <= n:
		return s
	case n < 2:
		return ""
	}
	return ellipsis.Cut(s, n-1)
}
