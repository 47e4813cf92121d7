// Package meminfo tells how much memory the machine has available for a new
// allocation, so that a setting that would need more (a context's KV cache) is refused
// with a clear error instead of the process being killed or crashing when it allocates.
package meminfo

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// Available returns the kernel's estimate of the memory available for starting new
// applications without swapping (MemAvailable in /proc/meminfo), in bytes. ok is false
// where it cannot be read (not Linux, an old kernel).
func Available() (bytes int64, ok bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	return parse(data)
}

// parse reads MemAvailable from /proc/meminfo's contents ("MemAvailable:  123 kB").
func parse(data []byte) (int64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 2 || string(fields[0]) != "MemAvailable:" {
			continue
		}
		n, err := strconv.ParseInt(string(fields[1]), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		unit := int64(1)
		if len(fields) >= 3 && string(fields[2]) == "kB" {
			unit = 1024
		}
		if n > (1<<62)/unit {
			return 0, false
		}
		return n * unit, true
	}
	return 0, false
}
