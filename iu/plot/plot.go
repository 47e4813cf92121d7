// Package plot draws a recorded timeline (iu.TimelineEntry lines) as an SVG picture of
// IUs per module over time, in the manner of retico's plots: one row per module, one bar
// per IU from its ADD to its COMMIT or REVOKE, labelled with its payload.
package plot

import (
	"fmt"
	"html"
	"io"
	"math"
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
	// (audio frames and progress reports are far too many to label); default "audio",
	// "progress".
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

// SVG writes the timeline entries as an SVG document.
func SVG(w io.Writer, entries []iu.TimelineEntry, opt Options) error {
	if opt.Width <= 0 {
		opt.Width = 1400
	}
	if opt.Dense == nil {
		opt.Dense = []string{"audio", "progress"}
	}
	dense := map[string]bool{}
	for _, k := range opt.Dense {
		dense[k] = true
	}
	if len(entries) == 0 {
		return fmt.Errorf("plot: the timeline is empty")
	}
	tMin, tMax := math.Inf(1), math.Inf(-1)
	for _, e := range entries {
		tMin = math.Min(tMin, e.T)
		tMax = math.Max(tMax, e.T)
	}
	if opt.From != 0 || opt.To != 0 {
		tMin, tMax = opt.From, opt.To
	}
	if tMax <= tMin {
		tMax = tMin + 1
	}

	rows, order := buildSpans(entries, dense, tMax)
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

// buildSpans turns updates into spans per module, in first-appearance order of modules.
func buildSpans(entries []iu.TimelineEntry, dense map[string]bool, tEnd float64) (map[string][]span, []string) {
	rows := map[string][]span{}
	var order []string
	open := map[iu.ID]int{} // IU → index of its span in rows[module]
	// Dense kinds: one span per module and kind, extended while updates keep coming.
	denseOpen := map[string]int{}
	const denseGap = 0.25
	for _, e := range entries {
		if _, ok := rows[e.Module]; !ok {
			rows[e.Module] = nil
			order = append(order, e.Module)
		}
		if dense[e.Kind] {
			key := e.Module + "\x00" + e.Kind
			if i, ok := denseOpen[key]; ok && e.T-rows[e.Module][i].end <= denseGap {
				rows[e.Module][i].end = math.Max(rows[e.Module][i].end, e.T)
				continue
			}
			rows[e.Module] = append(rows[e.Module], span{start: e.T, end: e.T, kind: e.Kind, label: e.Kind, state: iu.Committed})
			denseOpen[key] = len(rows[e.Module]) - 1
			continue
		}
		switch e.Type {
		case iu.Add:
			rows[e.Module] = append(rows[e.Module], span{start: e.T, end: tEnd, label: e.Payload, kind: e.Kind, state: iu.Open})
			open[e.IU] = len(rows[e.Module]) - 1
		case iu.UpdatePayload:
			if i, ok := open[e.IU]; ok {
				rows[e.Module][i].label = e.Payload
			}
		case iu.Commit, iu.Revoke:
			if i, ok := open[e.IU]; ok {
				s := &rows[e.Module][i]
				if e.T > s.start {
					s.end = e.T
				} else if e.Type == iu.Commit {
					// ADD and COMMIT together: the IU is final at once; draw it until the
					// module's next IU replaces it (set below) or as a thin mark.
					s.end = s.start
				}
				s.state = iu.Committed
				if e.Type == iu.Revoke {
					s.state = iu.Revoked
					s.end = math.Max(e.T, s.start)
				}
				delete(open, e.IU)
			}
		}
	}
	for m, spans := range rows {
		// IUs that became final the moment they were added (clauses, chunks, utterances)
		// are drawn until the module's next IU of the same kind starts, which reads like
		// retico's plots.
		for i := range spans {
			if spans[i].end == spans[i].start && !dense[spans[i].kind] {
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
	return rows, order
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
