package meminfo

import (
	"runtime"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"MemTotal:        8000000 kB\nMemFree:  100 kB\nMemAvailable:    4000000 kB\n", 4000000 * 1024, true},
		{"MemAvailable: 12\n", 12, true},
		{"MemTotal: 1 kB\n", 0, false},
		{"MemAvailable: -5 kB\n", 0, false},
		{"MemAvailable: x kB\n", 0, false},
		{"MemAvailable: 99999999999999999999 kB\n", 0, false},
		{"MemAvailable: 9223372036854775 kB\n", 0, false},
		{"", 0, false},
	} {
		got, ok := parse([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parse(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestAvailable(t *testing.T) {
	n, ok := Available()
	if runtime.GOOS == "linux" && (!ok || n <= 0) {
		t.Fatalf("Available() = %d, %v on Linux", n, ok)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("MemAvailable:    4000000 kB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if n, ok := parse(data); ok && n < 0 {
			t.Fatalf("negative %d", n)
		}
	})
}
