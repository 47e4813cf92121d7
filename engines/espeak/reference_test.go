package espeak

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-voice/parley/internal/testenv"
)

// The tests in this file check the package against libespeak-ng itself: an independent C
// program (testdata/reference.c) drives the classic speak_lib.h API in synchronous mode,
// and the espeak-ng command line writes WAVs. Because the library's output depends on what
// the process synthesised before (see Synth), each side runs in a fresh process: the Go
// side is this test binary re-executed as TestReferenceHelper.

const helperEnv = "PARLEY_ESPEAK_REFERENCE_HELPER"

// referenceTexts are sentences with non-ASCII letters (precomposed and combining),
// numbers, punctuation, quotation marks, symbols, emoji and CJK.
func referenceTexts() []string {
	return []string{
		"Héllo café, it costs 3.5 dollars. Next sentence!",
		"The naïve façade cost €1,234.56 on 3/4/2024; “quoted” words — and more?",
		"Crème brûlée at 7:30 p.m., 12% off... Don't wait!",
		"Zürich's Ørsted (ÅÄÖ) — déjà vu: 42nd street, room 101.",
		"Emoji 😀 and CJK 中文, then e\u0301te\u0301 with combining accents.",
	}
}

type referenceConfig struct {
	Name                string
	Voice               string
	Rate, Pitch, Volume int
	Texts, Out          string // helper only
}

func referenceConfigs() []referenceConfig {
	return []referenceConfig{
		{Name: "default", Voice: "en-us", Rate: DefaultRate, Pitch: DefaultPitch, Volume: DefaultVolume},
		{Name: "en-gb-fast-high-loud", Voice: "en-gb", Rate: 260, Pitch: 72, Volume: 150},
	}
}

// refEvent is one event as both sides dump it.
type refEvent struct {
	Type, Position, Length, Sample, Number, Start, End int32
}

type refRecord struct {
	Samples []int16
	Events  []refEvent
}

const (
	evWord     = 1
	evSentence = 2
	evEnd      = 5
)

func writeRecords(w io.Writer, recs []refRecord) error {
	for _, r := range recs {
		if err := binary.Write(w, binary.LittleEndian, int32(len(r.Samples))); err != nil {
			return err
		}
		if err := binary.Write(w, binary.LittleEndian, r.Samples); err != nil {
			return err
		}
		if err := binary.Write(w, binary.LittleEndian, int32(len(r.Events))); err != nil {
			return err
		}
		if err := binary.Write(w, binary.LittleEndian, r.Events); err != nil {
			return err
		}
	}
	return nil
}

func readRecords(t *testing.T, path string) []refRecord {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(data)
	var out []refRecord
	for r.Len() > 0 {
		var n int32
		var rec refRecord
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rec.Samples = make([]int16, n)
		if err := binary.Read(r, binary.LittleEndian, rec.Samples); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if err := binary.Read(r, binary.LittleEndian, &n); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rec.Events = make([]refEvent, n)
		if err := binary.Read(r, binary.LittleEndian, rec.Events); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, rec)
	}
	return out
}

func writeTexts(t *testing.T, texts []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "texts")
	if err := os.WriteFile(p, []byte(strings.Join(texts, "\x00")+"\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReferenceHelper is the Go side of TestMatchesCAPI when this binary is re-executed
// with helperEnv set: a fresh process whose library has synthesised nothing yet.
func TestReferenceHelper(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		t.Skip("runs only as TestMatchesCAPI's helper process")
	}
	var cfg referenceConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cfg.Texts)
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	s, err := New(Options{Voice: cfg.Voice, Rate: cfg.Rate, Pitch: cfg.Pitch, Volume: cfg.Volume})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var recs []refRecord
	for _, text := range texts {
		var rec refRecord
		// Stream, not Synthesize, so the pieces' concatenation is what is compared.
		err := s.Stream(context.Background(), text, func(p Piece) error {
			if p.Start != len(rec.Samples) {
				return fmt.Errorf("piece starts at %d after %d samples", p.Start, len(rec.Samples))
			}
			rec.Samples = append(rec.Samples, p.Samples...)
			for _, w := range p.Words {
				rec.Events = append(rec.Events, refEvent{Type: evWord, Position: int32(w.Position), Length: int32(w.Length),
					Sample: int32(w.Sample), Number: int32(w.Number), Start: int32(w.CharStart), End: int32(w.CharEnd)})
			}
			for _, b := range p.Boundaries {
				typ := int32(evSentence)
				if b.Kind == ClauseEnd {
					typ = evEnd
				}
				rec.Events = append(rec.Events, refEvent{Type: typ, Position: int32(b.Position), Sample: int32(b.Sample),
					Number: int32(b.Number), Start: int32(b.Char), End: int32(b.Char)})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	f, err := os.Create(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeRecords(f, recs); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func buildReference(t *testing.T) string {
	t.Helper()
	gcc := testenv.Command(t, "gcc", testenv.EnvFix)
	pkgConfig := testenv.Command(t, "pkg-config", testenv.EnvFix)
	flags, err := exec.Command(pkgConfig, "--cflags", "--libs", "espeak-ng").Output()
	if err != nil {
		testenv.Missing(t, "pkg-config data for espeak-ng", testenv.EnvFix)
	}
	bin := filepath.Join(t.TempDir(), "reference")
	args := append([]string{"-O2", "-Wall", "-o", bin, filepath.Join("testdata", "reference.c")}, strings.Fields(string(flags))...)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building the C reference: %v\n%s", err, out)
	}
	return bin
}

func runReference(t *testing.T, bin string, cfg referenceConfig, texts []string) []refRecord {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ref.bin")
	cmd := exec.Command(bin, cfg.Voice, strconv.Itoa(cfg.Rate), strconv.Itoa(cfg.Pitch), strconv.Itoa(cfg.Volume), writeTexts(t, texts), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("C reference: %v\n%s", err, b)
	}
	return readRecords(t, out)
}

func runGoHelper(t *testing.T, cfg referenceConfig, texts []string) []refRecord {
	t.Helper()
	cfg.Texts = writeTexts(t, texts)
	cfg.Out = filepath.Join(t.TempDir(), "go.bin")
	spec, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReferenceHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(spec))
	if b, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(b, []byte("--- PASS: TestReferenceHelper")) {
		t.Fatalf("Go helper process: %v\n%s", err, b)
	}
	return readRecords(t, cfg.Out)
}

// runCLI returns the samples of espeak-ng --stdout for text.
func runCLI(t *testing.T, cfg referenceConfig, text string) []int16 {
	t.Helper()
	cli := testenv.Command(t, "espeak-ng", testenv.EnvFix)
	cmd := exec.Command(cli, "-v", cfg.Voice, "-s", strconv.Itoa(cfg.Rate), "-p", strconv.Itoa(cfg.Pitch),
		"-a", strconv.Itoa(cfg.Volume), "--stdout", text)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	wav, err := cmd.Output()
	if err != nil {
		t.Fatalf("espeak-ng: %v\n%s", err, stderr.String())
	}
	rate, samples, err := parseWAV(wav)
	if err != nil {
		t.Fatalf("espeak-ng --stdout: %v", err)
	}
	if rate != 22050 {
		t.Fatalf("espeak-ng --stdout: rate %d", rate)
	}
	return samples
}

// parseWAV reads a 16-bit mono PCM WAV. espeak-ng writes a placeholder data size when it
// writes to a pipe, so the data chunk runs to the end of the input whatever its header says.
func parseWAV(b []byte) (rate int, samples []int16, err error) {
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return 0, nil, errors.New("not a RIFF/WAVE file")
	}
	fmtSeen := false
	for off := 12; off+8 <= len(b); {
		id, size := string(b[off:off+4]), int(binary.LittleEndian.Uint32(b[off+4:off+8]))
		body := b[off+8:]
		switch id {
		case "fmt ":
			if len(body) < 16 {
				return 0, nil, errors.New("short fmt chunk")
			}
			format, channels := binary.LittleEndian.Uint16(body[0:2]), binary.LittleEndian.Uint16(body[2:4])
			rate = int(binary.LittleEndian.Uint32(body[4:8]))
			bits := binary.LittleEndian.Uint16(body[14:16])
			if format != 1 || channels != 1 || bits != 16 {
				return 0, nil, fmt.Errorf("want 16-bit mono PCM, got format %d, %d channels, %d bits", format, channels, bits)
			}
			fmtSeen = true
		case "data":
			if !fmtSeen {
				return 0, nil, errors.New("data before fmt")
			}
			if size > len(body) || size < 0 {
				size = len(body)
			}
			samples = make([]int16, size/2)
			if err := binary.Read(bytes.NewReader(body[:size/2*2]), binary.LittleEndian, samples); err != nil {
				return 0, nil, err
			}
			return rate, samples, nil
		}
		off += 8 + size + size%2
	}
	return 0, nil, errors.New("no data chunk")
}

func compareRecords(t *testing.T, label, text string, want, got refRecord) {
	t.Helper()
	if len(want.Samples) != len(got.Samples) {
		t.Errorf("%s %q: %d samples, C API %d", label, text, len(got.Samples), len(want.Samples))
	} else if i := firstDiff(want.Samples, got.Samples); i >= 0 {
		t.Errorf("%s %q: sample %d is %d, C API %d", label, text, i, got.Samples[i], want.Samples[i])
	}
	for _, typ := range []int32{evWord, evSentence, evEnd} {
		w, g := eventsOf(want.Events, typ), eventsOf(got.Events, typ)
		if len(w) != len(g) {
			t.Errorf("%s %q: %d events of type %d, C API %d", label, text, len(g), typ, len(w))
			continue
		}
		for i := range w {
			we, ge := w[i], g[i]
			// espeak's raw report and the sample position must match exactly.
			if we.Position != ge.Position || we.Length != ge.Length || we.Sample != ge.Sample || we.Number != ge.Number {
				t.Errorf("%s %q: event %d/%d: got %+v, C API %+v", label, text, typ, i, ge, we)
				continue
			}
			if we.Start != ge.Start {
				t.Errorf("%s %q: event %d/%d starts at byte %d, C API byte %d", label, text, typ, i, ge.Start, we.Start)
			}
			switch {
			case typ != evWord:
			case we.Length > 0 && we.End != ge.End:
				t.Errorf("%s %q: word %d ends at byte %d, C API byte %d", label, text, i, ge.End, we.End)
			case we.Length == 0 && ge.End < ge.Start:
				t.Errorf("%s %q: word %d (length 0) has span %d..%d", label, text, i, ge.Start, ge.End)
			}
		}
	}
}

func eventsOf(evs []refEvent, typ int32) []refEvent {
	var out []refEvent
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func firstDiff(a, b []int16) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestMatchesCAPI checks that Synth produces exactly the samples and events of the
// libespeak-ng C API, and the samples of the espeak-ng command line, for the same text
// and voice settings.
func TestMatchesCAPI(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("helper process")
	}
	testenv.Command(t, "espeak-ng", testenv.EnvFix)
	ref := buildReference(t)
	texts := referenceTexts()
	for _, cfg := range referenceConfigs() {
		t.Run(cfg.Name, func(t *testing.T) {
			words := 0
			for i, text := range texts {
				// A fresh process per text on every side.
				want := runReference(t, ref, cfg, []string{text})
				got := runGoHelper(t, cfg, []string{text})
				if len(want) != 1 || len(got) != 1 {
					t.Fatalf("text %d: %d C records, %d Go records", i, len(want), len(got))
				}
				compareRecords(t, "fresh", text, want[0], got[0])
				words += len(eventsOf(got[0].Events, evWord))
				cli := runCLI(t, cfg, text)
				if len(cli) != len(got[0].Samples) {
					t.Errorf("text %d: %d samples, espeak-ng --stdout %d", i, len(got[0].Samples), len(cli))
				} else if d := firstDiff(cli, got[0].Samples); d >= 0 {
					t.Errorf("text %d: sample %d is %d, espeak-ng --stdout %d", i, d, got[0].Samples[d], cli[d])
				}
			}
			// All texts one after another in one process on each side: the library's
			// carried-over state must evolve the same way.
			want := runReference(t, ref, cfg, texts)
			got := runGoHelper(t, cfg, texts)
			if len(want) != len(texts) || len(got) != len(texts) {
				t.Fatalf("sequence: %d C records, %d Go records", len(want), len(got))
			}
			for i := range texts {
				compareRecords(t, "sequence", texts[i], want[i], got[i])
			}
			t.Logf("%d texts, %d word events: samples and events identical to the C API, samples identical to espeak-ng --stdout", len(texts), words)
		})
	}
}
