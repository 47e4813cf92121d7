// Command gen writes the one-line comments of a configuration's keys, taken from the
// doc comments of its Go struct types, into a Go file of the package it runs in (go
// generate runs it there): see package configdoc.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/parley-voice/parley/internal/configdoc"
)

func main() {
	typeName := flag.String("type", "Config", "the configuration's struct type in this package")
	funcName := flag.String("func", "configFieldDocs", "the name of the generated function")
	out := flag.String("out", "configdoc_gen.go", "the file to write")
	flag.Parse()
	if err := run(*typeName, *funcName, *out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(typeName, funcName, out string) error {
	pkgDir, err := os.Getwd()
	if err != nil {
		return err
	}
	moduleDir, err := findModule(pkgDir)
	if err != nil {
		return err
	}
	pkgName := os.Getenv("GOPACKAGE")
	if pkgName == "" {
		return fmt.Errorf("run me through go generate (GOPACKAGE is not set)")
	}
	src, err := configdoc.File(moduleDir, pkgDir, typeName, pkgName, funcName)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

func findModule(dir string) (string, error) {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = parent
	}
}
