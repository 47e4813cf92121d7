package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/iu/plot"
)

func plotCommand() command {
	return command{
		Name:    "plot",
		Summary: "draw a recorded timeline (JSON lines) as an SVG of IUs per module",
		Run:     runPlot,
	}
}

// maxTimelineBytes bounds the timeline 'agent plot' reads (a live session of hours).
const maxTimelineBytes = 256 << 20

// maxPlotWidth bounds --width: wider plots are no use on any screen.
const maxPlotWidth = 1 << 16

func runPlot(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "plot", "TIMELINE.jsonl")
	out := fs.String("o", "", "output SVG file (default: TIMELINE.svg)")
	from := floatVar(fs, "from", 0, atLeast0, "start of the time range in seconds")
	to := floatVar(fs, "to", 0, atLeast0, "end of the time range in seconds (0: the whole timeline)")
	width := fs.Int("width", 1400, "width of the plot in pixels")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageErrorf("plot needs one timeline file")
	}
	if *width < 0 || *width > maxPlotWidth {
		return usageErrorf("--width %d is not in 0–%d (0: 1400)", *width, maxPlotWidth)
	}
	if *to != 0 && *to <= *from {
		return usageErrorf("--to %g must be after --from %g (or 0: the whole timeline)", *to, *from)
	}
	f, err := regularfile.Open(rest[0])
	if err != nil {
		return err
	}
	defer f.Close()
	path := *out
	if path == "" {
		path = trimExt(rest[0]) + ".svg"
	}
	// Drawn as the timeline is read (a long session's timeline is never held whole), in
	// memory first: a plot that fails leaves no (empty) file behind.
	var svg bytes.Buffer
	updates, err := plot.SVGFrom(&svg, f, plot.Options{Width: *width, From: *from, To: *to})
	if err != nil {
		return fmt.Errorf("%s: %w", rest[0], err)
	}
	if err := regularfile.WriteFile(path, svg.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "wrote %s (%d updates)\n", path, updates)
	return nil
}

// trimExt drops a file name's last extension.
func trimExt(path string) string {
	for i := len(path) - 1; i >= 0 && path[i] != '/'; i-- {
		if path[i] == '.' {
			return path[:i]
		}
	}
	return path
}
