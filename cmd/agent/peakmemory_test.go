package main

import "testing"

func TestStatusField(t *testing.T) {
	const status = "Name:\tagent\nVmPeak:\t 1000 kB\nVmHWM:\t  248252 kB\nVmRSS:\t  247096 kB\nThreads:\t12\n"
	tests := []struct {
		name, status, field string
		want                int64
	}{
		{"peak", status, "VmHWM", 248252 << 10},
		{"resident", status, "VmRSS", 247096 << 10},
		{"missing", status, "VmSwap", 0},
		{"not a size", status, "Threads", 0},
		{"another unit", "VmHWM:\t12 MB\n", "VmHWM", 0},
		{"negative", "VmHWM:\t-12 kB\n", "VmHWM", 0},
		{"prefix of another field", "VmHWMx:\t12 kB\n", "VmHWM", 0},
		{"empty", "", "VmHWM", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := statusField([]byte(tc.status), tc.field); got != tc.want {
				t.Errorf("statusField(%q) = %d, want %d", tc.field, got, tc.want)
			}
		})
	}
	if peakMemory() <= 0 {
		t.Error("peakMemory() says nothing about this process")
	}
}

func FuzzStatusField(f *testing.F) {
	f.Add([]byte("VmHWM:\t  248252 kB\n"))
	f.Add([]byte("VmHWM:\t99999999999999999999 kB\n"))
	f.Fuzz(func(t *testing.T, status []byte) {
		if got := statusField(status, "VmHWM"); got < 0 {
			t.Errorf("statusField(%q) = %d", status, got)
		}
	})
}
