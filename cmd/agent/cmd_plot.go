package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

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

func runPlot(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "plot", "TIMELINE.jsonl")
	out := fs.String("o", "", "output SVG file (default: TIMELINE.svg)")
	from := fs.Float64("from", 0, "start of the time range in seconds")
	to := fs.Float64("to", 0, "end of the time range in seconds (0: the whole timeline)")
	width := fs.Int("width", 1400, "width of the plot in pixels")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return usageErrorf("plot needs one timeline file")
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
	if err := writeFileAtomic(path, svg.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "wrote %s (%d updates)\n", path, updates)
	return nil
}

// writeFileAtomic writes data to path through a temporary file in the same folder, so
// that path holds either its old contents or all of data, never a part of it.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
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
