// Command gen writes the evaluation's scenario set (package evalset) into a folder,
// configs/eval by default, and removes the scenario files there that the set no longer
// holds. scripts/eval-set runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/parley-voice/parley/eval/evalset"
)

func main() {
	out := flag.String("o", "configs/eval", "the folder to write the set into")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "eval-set:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := evalset.Generate()
	keep := map[string]bool{}
	for _, f := range files {
		keep[f.Name] = true
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return err
		}
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if !keep[filepath.Base(p)] {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f.Name, ".yaml") {
			n++
		}
	}
	fmt.Printf("wrote %d scenarios and %s into %s\n", n, evalset.CIList, dir)
	return nil
}
