package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/modelstore"
	"golang.org/x/term"
)

func modelsCommand() command {
	return command{
		Name:    "models",
		Summary: "list, download (with resume and checksums) and verify the real models",
		Run:     runModels,
	}
}

func runModels(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "models", "list | pull [--demo | NAME...] | verify [--demo | NAME...]")
	dir := fs.String("dir", a.paths.Models, "models directory")
	mirror := fs.String("mirror", os.Getenv("PARLEY_MODEL_MIRROR"), "fetch from this base URL instead of the models' hosts (keeps their paths)")
	catalogFile := fs.String("catalog", "", "JSON file with a model catalog to use instead of the built-in one")
	retries := fs.Int("retries", 5, "how often a broken download is resumed before giving up")
	demo := fs.Bool("demo", false, "pull or verify the demo's models (configs/demo.yaml) instead of the defaults")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return usageErrorf("models needs a subcommand: list, pull or verify")
	}
	catalog := modelstore.Builtin()
	if *catalogFile != "" {
		if catalog, err = loadCatalog(*catalogFile); err != nil {
			return err
		}
	}
	if *mirror != "" {
		catalog = catalog.WithMirror(*mirror)
	}
	selected := func(names []string) (modelstore.Catalog, error) {
		switch {
		case *demo && len(names) > 0:
			return nil, usageErrorf("give --demo or model names, not both")
		case *demo:
			return catalog.Demos(), nil
		case len(names) == 0:
			return catalog.Defaults(), nil
		}
		var out modelstore.Catalog
		for _, n := range names {
			m, err := catalog.Find(n)
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
		return out, nil
	}
	d := &modelstore.Downloader{Dir: *dir, Retries: *retries}
	switch rest[0] {
	case "list":
		tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKIND\tSIZE\tDEFAULT\tDEMO\tSTATUS\tDESCRIPTION")
		for _, m := range catalog {
			status := "not downloaded"
			if _, err := os.Stat(d.Path(m)); err == nil {
				status = "present (run verify)"
			}
			yes := func(b bool) string {
				if b {
					return "yes"
				}
				return ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f MB\t%s\t%s\t%s\t%s\n", m.Name, m.Kind, float64(m.Size)/1e6, yes(m.Default), yes(m.Demo), status, m.Description)
		}
		return tw.Flush()
	case "pull":
		models, err := selected(rest[1:])
		if err != nil {
			return err
		}
		plain := true
		if f, ok := a.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			plain = false
		}
		// Every model is tried: one that cannot be fetched must not keep the others.
		var failed []string
		offline := false
		for _, m := range models {
			fmt.Fprintf(a.stdout, "pulling %s (%s, %.0f MB) from %s\n", m.Name, m.File, float64(m.Size)/1e6, m.URL)
			path, err := d.Pull(ctx, m, modelstore.NewBar(a.stderr, m.Name, plain))
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				fmt.Fprintf(a.stdout, "%s: FAILED: %v\n", m.Name, err)
				failed = append(failed, m.Name)
				offline = offline || errors.Is(err, modelstore.ErrOffline)
				continue
			}
			fmt.Fprintf(a.stdout, "%s: ok (sha256 verified) %s\n", m.Name, path)
		}
		if len(failed) == 0 {
			return nil
		}
		if offline {
			which := ""
			if *demo {
				which = " --demo"
			}
			fmt.Fprintf(a.stdout, "\nThis machine seems to be offline: the models' hosts cannot be reached.\n"+
				"Download the files elsewhere and serve them from a mirror with the same paths, then\n"+
				"  agent models pull%s --mirror http://HOST:PORT   (or set PARLEY_MODEL_MIRROR)\n"+
				"or copy them into %s and run 'agent models verify%s'.\n", which, *dir, which)
		}
		return fmt.Errorf("%d of %d model(s) not pulled: %s", len(failed), len(models), strings.Join(failed, ", "))
	case "verify":
		models, err := selected(rest[1:])
		if err != nil {
			return err
		}
		failed := 0
		for _, m := range models {
			if err := modelstore.Verify(d.Path(m), m); err != nil {
				failed++
				fmt.Fprintf(a.stdout, "%s: FAILED: %v\n  fix: agent models pull %s\n", m.Name, err, m.Name)
				continue
			}
			fmt.Fprintf(a.stdout, "%s: ok %s\n", m.Name, d.Path(m))
		}
		if failed > 0 {
			return fmt.Errorf("%d model(s) missing or corrupt", failed)
		}
		return nil
	default:
		return usageErrorf("unknown models subcommand %q (want list, pull or verify)", rest[0])
	}
}

// maxCatalogBytes bounds a --catalog file.
const maxCatalogBytes = 1 << 20

func loadCatalog(path string) (modelstore.Catalog, error) {
	data, err := regularfile.ReadFile(path, maxCatalogBytes)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	var c modelstore.Catalog
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("catalog %s: %w", path, err)
	}
	for i, m := range c {
		if m.Name == "" || m.File == "" || m.URL == "" {
			return nil, fmt.Errorf("catalog %s: entry %d needs name, file and url", path, i)
		}
	}
	return c, nil
}
