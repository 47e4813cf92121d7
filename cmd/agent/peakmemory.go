package main

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// peakMemory returns the most resident memory the process has held so far, in bytes
// (Linux's VmHWM), or 0 where the system does not say.
func peakMemory() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return statusField(status, "VmHWM")
}

// statusField reads a size field ("VmHWM:   248252 kB") of a /proc status file in
// bytes; 0 when it is missing or not a size.
func statusField(status []byte, name string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != name {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return 0
		}
		return kb << 10
	}
	return 0
}
