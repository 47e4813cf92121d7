package audio

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// tone is n frames of a sine at amplitude amp, interleaved over channels.
func tone(rate, channels, n int, hz, amp float64) Frame {
	f := Frame{Rate: rate, Channels: channels, Samples: make([]float32, n*channels)}
	for i := range n {
		v := float32(amp * math.Sin(2*math.Pi*hz*float64(i)/float64(rate)))
		for c := range channels {
			f.Samples[i*channels+c] = v
		}
	}
	return f
}

// TestMixWAVFiles: the streamed mix is what mixing the decoded files in memory and
// limiting its peak gives, for inputs of different lengths, longer than one block,
// with and without a peak above the ceiling.
func TestMixWAVFiles(t *testing.T) {
	tests := []struct {
		name   string
		inputs []Frame
		bits   int
	}{
		{"quiet, the second longer", []Frame{tone(16000, 1, 1000, 440, 0.3), tone(16000, 1, 3*mixBlockFrames+17, 300, 0.3)}, 16},
		{"loud, the first longer", []Frame{tone(16000, 1, 2*mixBlockFrames+5, 440, 0.8), tone(16000, 1, mixBlockFrames, 440, 0.8)}, 16},
		{"stereo float, three inputs", []Frame{tone(22050, 2, 5000, 200, 0.7), tone(22050, 2, mixBlockFrames+1, 200, 0.7), tone(22050, 2, 10, 50, 0.1)}, 32},
		{"one input", []Frame{tone(8000, 1, 100, 100, 1.5)}, 16},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var paths []string
			var decoded []Frame
			for i, f := range tc.inputs {
				p := filepath.Join(dir, string(rune('a'+i))+".wav")
				if err := WriteWAVFile(p, f, 32); err != nil {
					t.Fatal(err)
				}
				d, err := DecodeWAVFile(p)
				if err != nil {
					t.Fatal(err)
				}
				paths, decoded = append(paths, p), append(decoded, d)
			}
			want, err := MixFrames(decoded...)
			if err != nil {
				t.Fatal(err)
			}
			LimitPeak(want.Samples, 0.99)
			wantPath := filepath.Join(dir, "want.wav")
			if err := WriteWAVFile(wantPath, want, tc.bits); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "mix.wav")
			if err := MixWAVFiles(out, tc.bits, 0.99, paths...); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			wantBytes, err := os.ReadFile(wantPath)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(wantBytes) {
				g, _ := DecodeWAVFile(out)
				assertSamples(t, g.Samples, want.Samples, 0)
				t.Fatal("the files differ although their samples agree")
			}
		})
	}
}

// TestMixWAVFilesRejects: inputs that cannot be mixed are errors that name the file,
// and a failed mix leaves the file it would replace as it was, with no temporary
// file beside it.
func TestMixWAVFilesRejects(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, f Frame) string {
		p := filepath.Join(dir, name)
		if err := WriteWAVFile(p, f, 16); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mono16 := write("mono16.wav", tone(16000, 1, 100, 440, 0.5))
	mono22 := write("mono22.wav", tone(22050, 1, 100, 440, 0.5))
	stereo := write("stereo.wav", tone(16000, 2, 100, 440, 0.5))
	truncated := filepath.Join(dir, "truncated.wav")
	data, err := os.ReadFile(mono16)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, data[:len(data)-50], 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.wav")
	if err := os.WriteFile(out, []byte("the old file"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		inputs []string
		want   string
		is     error
	}{
		{"no input", nil, "nothing to mix", nil},
		{"another rate", []string{mono16, mono22}, "mono22.wav is 22050 Hz x1", nil},
		{"another channel count", []string{mono16, stereo}, "stereo.wav is 16000 Hz x2", nil},
		{"missing", []string{mono16, filepath.Join(dir, "missing.wav")}, "missing.wav", os.ErrNotExist},
		{"truncated", []string{truncated, mono16}, "truncated.wav", ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := MixWAVFiles(out, 16, 0.99, tc.inputs...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if got, _ := os.ReadFile(out); string(got) != "the old file" {
				t.Errorf("the failed mix changed the file to %q", got)
			}
		})
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the folder holds %v: a failed mix left a file behind", names)
	}
}

// TestMixWAVFilesStreams: mixing a minute of audio allocates no more than mixing
// ten seconds, because the mix goes a block at a time.
func TestMixWAVFilesStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 4 MB of audio")
	}
	dir := t.TempDir()
	allocated := func(seconds int) uint64 {
		f := tone(16000, 1, seconds*16000, 440, 0.9)
		a, b := filepath.Join(dir, "a.wav"), filepath.Join(dir, "b.wav")
		for _, p := range []string{a, b} {
			if err := WriteWAVFile(p, f, 16); err != nil {
				t.Fatal(err)
			}
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if err := MixWAVFiles(filepath.Join(dir, "mix.wav"), 16, 0.99, a, b); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	short, long := allocated(10), allocated(60)
	t.Logf("mixing 10 s allocated %d bytes, 60 s %d bytes", short, long)
	if long > short+64<<10 {
		t.Errorf("mixing 60 s allocated %d bytes, 10 s %d: the mix holds more of a longer input", long, short)
	}
}
