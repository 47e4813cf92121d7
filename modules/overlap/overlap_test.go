package overlap

import (
	"bufio"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/pitch"
	"github.com/parley-voice/parley/clock"
	"github.com/parley-voice/parley/control"
	"github.com/parley-voice/parley/internal/voices"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/vad"
)

// vowel synthesises an open vowel ("ah"): glottal pulses at f0 through formants at 700,
// 1200 and 2600 Hz.
func vowel(f0 float64, dur time.Duration, level float64) []float32 {
	v := pitch.Vowel(16000, f0, f0, int(audio.DurationToSamples(dur, 16000)))
	peak := 0.0
	for _, y := range v {
		peak = max(peak, math.Abs(y))
	}
	out := make([]float32, len(v))
	for i, y := range v {
		out[i] = float32(y / peak * level)
	}
	return out
}

func judgeOf(s []float32) Sound {
	a := newAnalyzer()
	var ac acoustics
	a.push(s, ac.add)
	k, _, _ := ac.judge()
	return k
}

func TestAcoustics(t *testing.T) {
	tests := []struct {
		name  string
		sound []float32
		want  Sound
	}{
		{"a hummed mm-hmm", voices.Hum(voices.MmHmm, 110, 0.5), Hum},
		{"a high hmm", voices.Hum(voices.Hmm, 210, 0.3), Hum},
		{"mhm", voices.Hum(voices.Mhm, 150, 0.5), Hum},
		{"an open vowel", vowel(120, 400*time.Millisecond, 0.5), Voice},
		// A deep voice, its pitch periods longer than half the analysis frame: the
		// lags searched reach down to 70 Hz (a vowel at 68 Hz still peaks near 70 Hz).
		{"an open vowel at 68 Hz", vowel(68, 400*time.Millisecond, 0.5), Voice},
		{"a cough", voices.Cough(1, 0.5), Noise},
		{"a burst of noise", voices.Noise(2, 0.2, 0.5), Noise},
		{"knocks", voices.Knock(3, 3, 0.5), Noise},
		{"too short to say", vowel(120, 50*time.Millisecond, 0.5), Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := judgeOf(tt.sound); got != tt.want {
				a := newAnalyzer()
				var ac acoustics
				a.push(tt.sound, ac.add)
				_, v, h := ac.judge()
				t.Errorf("judged %v (voiced %.2f, hum-like %.2f), want %v", got, v, h, tt.want)
			}
		})
	}
}

func TestWriteLM(t *testing.T) {
	var b strings.Builder
	v := Vocabulary{Backchannels: []string{"Yeah", "I see", "yeah."}, Interrupt: []string{"stop", "Hold on,"}, Common: []string{"the", "bad\x00token", "see"}}
	if err := WriteLM(&b, v); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	var words []string
	probs := map[string]float64{}
	backoff := map[string]float64{}
	bigrams := map[string]float64{}
	declared, declared2 := -1, -1
	section := ""
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "ngram 1="); ok {
			declared, _ = strconv.Atoi(n)
		}
		if n, ok := strings.CutPrefix(line, "ngram 2="); ok {
			declared2, _ = strconv.Atoi(n)
		}
		if strings.HasPrefix(line, "\\") {
			section = line
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		p, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		switch {
		case section == "\\1-grams:" && len(f) <= 3:
			words = append(words, f[1])
			probs[f[1]] = p
			if len(f) == 3 {
				backoff[f[1]], _ = strconv.ParseFloat(f[2], 64)
			}
		case section == "\\2-grams:" && len(f) == 3:
			bigrams[f[1]+" "+f[2]] = p
		default:
			t.Errorf("line %q in section %q", line, section)
		}
	}
	if got := strings.Join(words, " "); got != "<s> </s> yeah i see stop hold on the" {
		t.Fatalf("unigrams %q", got)
	}
	if declared != len(words) || declared2 != len(bigrams) {
		t.Errorf("header declares %d unigrams and %d bigrams, the file has %d and %d", declared, declared2, len(words), len(bigrams))
	}
	var total float64
	for _, w := range words[2:] {
		total += math.Pow(10, probs[w])
	}
	if math.Abs(total-1) > 1e-3 {
		t.Errorf("word probabilities sum to %g", total)
	}
	if probs["stop"] <= probs["the"] || probs["see"] != probs["yeah"] {
		t.Errorf("backchannels and interrupt words are not boosted: %v", probs)
	}
	if probs["hold"] != probs["the"] || probs["on"] != probs["the"] {
		t.Errorf("the words of an interrupt phrase are boosted on their own: %v", probs)
	}
	// The phrases "i see" and "hold on" are bigrams; after "i" every other word keeps
	// its unigram probability (backoff weight 1).
	if len(bigrams) != 2 || bigrams["i see"] <= probs["see"] || bigrams["hold on"] <= probs["on"] {
		t.Errorf("bigrams %v, want \"i see\" and \"hold on\", likelier than their second words alone", bigrams)
	}
	if bo, ok := backoff["i"]; !ok || bo != 0 {
		t.Errorf("backoff of \"i\" %v, want 0 (log10 of 1)", backoff)
	}
	if err := WriteLM(&b, Vocabulary{Common: []string{" "}}); err == nil {
		t.Error("an empty vocabulary was accepted")
	}
}

// scripted is a Recognizer that answers by the length of the audio it is given: the
// words of the longest script entry not longer than it.
type scripted struct {
	mu      sync.Mutex
	entries []scriptEntry
	calls   []int // lengths decoded
}

type scriptEntry struct {
	from  int // samples
	words string
}

func (s *scripted) FinalOf(_ context.Context, samples []float32) (asr.Hypothesis, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, len(samples))
	var h asr.Hypothesis
	for _, e := range s.entries {
		if len(samples) >= e.from {
			h = asr.Hypothesis{}
			for _, w := range strings.Fields(e.words) {
				h.Words = append(h.Words, asr.HypWord{Text: w, Confidence: 0.9})
			}
		}
	}
	return h, nil
}

// feed is a test producer standing in for the source and the VAD: it sends 20 ms audio
// frames of samples as they would be spoken, and the VAD's IUs at the given times.
func feed(samples []float32, vadEvents map[time.Duration]func(*iu.Ports, map[string]iu.IU) []iu.Update) iu.Module {
	return feedLinear(samples, nil, vadEvents)
}

// linearFrame is a test payload with an echo canceller's linear output.
type linearFrame struct{ f audio.Frame }

func (l linearFrame) Kind() string             { return "aec-linear" }
func (l linearFrame) Summary() string          { return l.f.Summary() }
func (l linearFrame) LinearAudio() audio.Frame { return l.f }

// feedLinear is feed that also sends linear (when not nil) as an echo canceller's
// linear output, before each frame.
func feedLinear(samples, linear []float32, vadEvents map[time.Duration]func(*iu.Ports, map[string]iu.IU) []iu.Update) iu.Module {
	return iu.ModuleFunc{ModuleName: "src", Fn: func(ctx context.Context, p *iu.Ports) error {
		start := p.Now()
		ius := map[string]iu.IU{}
		const frame = 320
		for i := 0; i < len(samples); i += frame {
			end := min(i+frame, len(samples))
			at := start.Add(audio.SamplesToDuration(int64(end), 16000))
			for p.Now().Before(at) {
				if _, err := p.Next(ctx, at); err != nil {
					return err
				}
			}
			var ups []iu.Update
			if linear != nil {
				l := p.NewIU(linearFrame{audio.Frame{Rate: 16000, Channels: 1, Start: int64(i), Samples: linear[i:end]}})
				ups = append(ups, iu.AddOf(l), iu.CommitOf(l))
			}
			u := p.NewIU(audio.Frame{Rate: 16000, Channels: 1, Start: int64(i), Samples: samples[i:end]})
			ups = append(ups, iu.AddOf(u), iu.CommitOf(u))
			if ev, ok := vadEvents[audio.SamplesToDuration(int64(end), 16000)]; ok {
				ups = append(ups, ev(p, ius)...)
			}
			if err := p.Send(ctx, ups...); err != nil {
				return err
			}
		}
		return nil
	}}
}

type seen struct {
	at  time.Duration
	typ iu.UpdateType
	ev  Evidence
	gr  []iu.ID
}

func sink(out *[]seen, start time.Time) iu.Module {
	return iu.ModuleFunc{ModuleName: "sink", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case iu.EventInputDone:
				return nil
			case iu.EventMessage:
				for _, up := range ev.Message.Updates {
					if e, ok := up.IU.Payload.(Evidence); ok {
						*out = append(*out, seen{at: p.Now().Sub(start), typ: up.Type, ev: e, gr: up.IU.GroundedIn})
					}
				}
			}
		}
	}}
}

func run(t *testing.T, rec Recognizer, samples []float32, vadEvents map[time.Duration]func(*iu.Ports, map[string]iu.IU) []iu.Update) []seen {
	t.Helper()
	return runLinear(t, rec, samples, nil, vadEvents)
}

func runLinear(t *testing.T, rec Recognizer, samples, linear []float32, vadEvents map[time.Duration]func(*iu.Ports, map[string]iu.IU) []iu.Update) []seen {
	t.Helper()
	start := time.Unix(1000, 0)
	clk := clock.NewVirtual(start)
	defer clk.Close()
	net := iu.NewNetwork(iu.WithClock(clk))
	cfg := DefaultConfig()
	cfg.Enabled = true
	m, err := New("overlap", cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	var got []seen
	if err := net.Add(feedLinear(samples, linear, vadEvents), m, sink(&got, start)); err != nil {
		t.Fatal(err)
	}
	if err := net.ConnectNames("src", "overlap"); err != nil {
		t.Fatal(err)
	}
	if err := net.ConnectNames("overlap", "sink"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := net.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return got
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// vowelEvents are the VAD's IUs for a vowel over the agent from 0.5 s to 0.9 s: the
// candidate (its ID goes to *candidate), confirmed as a segment that ends at 0.93 s.
func vowelEvents(candidate *iu.ID) map[time.Duration]func(*iu.Ports, map[string]iu.IU) []iu.Update {
	return map[time.Duration]func(*iu.Ports, map[string]iu.IU) []iu.Update{
		ms(540): func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
			ius["cand"] = p.NewIU(vad.Candidate{Start: ms(470), Overlap: true})
			*candidate = ius["cand"].ID
			return []iu.Update{iu.AddOf(ius["cand"])}
		},
		ms(800): func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
			ius["seg"] = p.NewIU(vad.Segment{Start: ms(470), Overlap: true})
			return []iu.Update{iu.CommitOf(ius["cand"]), iu.AddOf(ius["seg"])}
		},
		ms(1200): func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
			u := ius["seg"]
			u.Payload = vad.Segment{Start: ms(470), End: ms(930), Overlap: true}
			return []iu.Update{iu.CommitOf(u)}
		},
	}
}

// TestModuleFollowsASound: a vowel over the agent from 0.5 s to 0.9 s, announced by the
// VAD's candidate and confirmed as a segment: the evidence IU is grounded in the
// candidate, decodes come every hop from the first-decode length with the pre-roll, the
// sound ends after the end silence, and the IU is committed when the segment ends.
func TestModuleFollowsASound(t *testing.T) {
	samples := make([]float32, 16000*2)
	copy(samples[8000:], vowel(130, 400*time.Millisecond, 0.5))
	rec := &scripted{entries: []scriptEntry{{0, ""}, {16 * 300, "stop"}}}
	var candidate iu.ID
	got := run(t, rec, samples, vowelEvents(&candidate))
	if len(got) < 3 || got[0].typ != iu.Add || got[len(got)-1].typ != iu.Commit {
		t.Fatalf("updates %+v", got)
	}
	if len(got[0].gr) != 1 || got[0].gr[0] != candidate {
		t.Errorf("the evidence is grounded in %v, want the candidate", got[0].gr)
	}
	if got[0].at != ms(540) || got[0].ev.Start != ms(470) {
		t.Errorf("first evidence at %v for a sound at %v", got[0].at, got[0].ev.Start)
	}
	// Decodes: the first once 100 ms of the sound is in, then every hop (audio comes in
	// 20 ms frames), each from 150 ms before the sound.
	preRoll := int(audio.DurationToSamples(ms(150), 16000))
	rec.mu.Lock()
	calls := append([]int(nil), rec.calls...)
	rec.mu.Unlock()
	if len(calls) < 4 {
		t.Fatalf("%d decodes", len(calls))
	}
	if want := preRoll + 16*100 + 16*10; calls[0] != want {
		t.Errorf("first decode of %d samples, want %d (pre-roll and the first 100 ms, as frames came)", calls[0], want)
	}
	hop := int(audio.DurationToSamples(DefaultConfig().Hop, 16000)+319) / 320 * 320 // in whole frames
	for i := 1; i < len(calls)-1; i++ {
		if d := calls[i] - calls[i-1]; d != hop {
			t.Errorf("decode %d adds %d samples, want one hop (%d)", i, d, hop)
		}
	}
	last := got[len(got)-1].ev
	if !last.Ended || last.End < ms(900) || last.End > ms(940) {
		t.Errorf("final evidence %+v: want the sound ended at 0.9 s", last)
	}
	if last.Sound != Voice || last.Text() != "stop" || last.Dropped {
		t.Errorf("final evidence %+v", last)
	}
	var endedAt time.Duration
	for _, s := range got {
		if s.ev.Ended && endedAt == 0 {
			endedAt = s.at
		}
	}
	if endedAt < ms(1000) || endedAt > ms(1040) {
		t.Errorf("the end was reported at %v: want after the 100 ms end silence", endedAt)
	}
}

// TestModuleStopsDecodingOnceTheAgentIsInterrupted: the vowel of TestModuleFollowsASound,
// and the manager interrupts the agent 230 ms into it. No decode starts after that, and
// the sound is still followed to its end.
func TestModuleStopsDecodingOnceTheAgentIsInterrupted(t *testing.T) {
	samples := make([]float32, 16000*2)
	copy(samples[8000:], vowel(130, 400*time.Millisecond, 0.5))
	rec := &scripted{entries: []scriptEntry{{0, ""}, {16 * 300, "stop"}}}
	var candidate iu.ID
	events := vowelEvents(&candidate)
	events[ms(700)] = func(p *iu.Ports, _ map[string]iu.IU) []iu.Update {
		return []iu.Update{iu.AddOf(p.NewIU(control.Command{Action: control.Interrupt, TurnID: 2}))}
	}
	got := run(t, rec, samples, events)
	rec.mu.Lock()
	calls := append([]int(nil), rec.calls...)
	rec.mu.Unlock()
	// The sound began at 470 ms with 150 ms of pre-roll: by 700 ms, 380 ms of it was in.
	heardBy := int(audio.DurationToSamples(ms(700-470+150), 16000))
	if len(calls) == 0 {
		t.Fatal("no decode before the interrupt")
	}
	for i, n := range calls {
		if n > heardBy {
			t.Errorf("decode %d of %d samples, started after the interrupt (%d were in)", i, n, heardBy)
		}
	}
	last := got[len(got)-1]
	if last.typ != iu.Commit || !last.ev.Ended || last.ev.End < ms(900) || last.ev.End > ms(940) {
		t.Errorf("final update %+v: want the sound committed, ended at 0.9 s", last)
	}
}

// keeping is a recogniser that keeps what it was given to decode.
type keeping struct {
	mu      sync.Mutex
	decoded [][]float32
}

func (k *keeping) FinalOf(_ context.Context, samples []float32) (asr.Hypothesis, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.decoded = append(k.decoded, slices.Clone(samples))
	return asr.Hypothesis{}, nil
}

// TestModuleDecodesTheLinearOutput: with an echo canceller's linear output beside the
// audio, the decodes (pre-roll included) are of the linear output, while the sound's
// acoustics and its end come from the audio: here the vowel is in the audio only.
func TestModuleDecodesTheLinearOutput(t *testing.T) {
	samples := make([]float32, 16000*2)
	copy(samples[8000:], vowel(130, 400*time.Millisecond, 0.5))
	linear := make([]float32, len(samples))
	for i := range linear {
		linear[i] = float32(i%100) * 1e-4
	}
	rec := &keeping{}
	var candidate iu.ID
	got := runLinear(t, rec, samples, linear, vowelEvents(&candidate))
	last := got[len(got)-1].ev
	if last.Sound != Voice || !last.Ended || last.End < ms(900) || last.End > ms(940) {
		t.Errorf("final evidence %+v: want a voice that ended at 0.9 s", last)
	}
	from := int(audio.DurationToSamples(ms(470)-DefaultConfig().LinearPreRoll, 16000))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.decoded) < 3 {
		t.Fatalf("%d decodes", len(rec.decoded))
	}
	for i, d := range rec.decoded {
		if !slices.Equal(d, linear[from:from+len(d)]) {
			t.Fatalf("decode %d (%d samples) is not of the linear output from the pre-roll on", i, len(d))
		}
	}
}

// TestModuleDropsWithdrawnSounds: a knock the VAD withdraws is committed as dropped at
// once; a candidate while the agent is silent is not followed.
func TestModuleDropsWithdrawnSounds(t *testing.T) {
	samples := make([]float32, 16000)
	copy(samples[4000:], voices.Knock(1, 2, 0.5))
	rec := &scripted{}
	events := map[time.Duration]func(*iu.Ports, map[string]iu.IU) []iu.Update{
		ms(100): func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
			return []iu.Update{iu.AddOf(p.NewIU(vad.Candidate{Start: ms(60), Overlap: false}))}
		},
		ms(300): func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
			ius["cand"] = p.NewIU(vad.Candidate{Start: ms(240), Overlap: true})
			return []iu.Update{iu.AddOf(ius["cand"])}
		},
		ms(500): func(p *iu.Ports, ius map[string]iu.IU) []iu.Update {
			return []iu.Update{iu.RevokeOf(ius["cand"])}
		},
	}
	got := run(t, rec, samples, events)
	if len(got) < 2 {
		t.Fatalf("updates %+v", got)
	}
	last := got[len(got)-1]
	if last.typ != iu.Commit || !last.ev.Dropped || !last.ev.Ended || last.at != ms(500) {
		t.Errorf("last update %+v", last)
	}
	for _, s := range got {
		if s.ev.Start != ms(240) {
			t.Errorf("evidence about a sound at %v: the one the agent was silent for must not be followed", s.ev.Start)
		}
	}
}

func TestWriteDict(t *testing.T) {
	dict := strings.Join([]string{
		"hold HH OW L D",
		"hold(2) HH AA L D",
		"on AA N",
		"second S EH K AH N D",
		"stop S T AA P",
		"yeah Y AE",
		"the DH AH",
		"zebra Z IY B R AH",
		"broken",
	}, "\n")
	var b strings.Builder
	v := Vocabulary{Backchannels: []string{"Yeah!"}, Interrupt: []string{"stop", "hold", "Hold on, a second"}, Common: []string{"the", "unknownword"}}
	if err := WriteDict(&b, v, strings.NewReader(dict)); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"hold HH OW L D", "hold(2) HH AA L D", "hold(3) HH OW L", "hold(4) HH AA L",
		"on AA N",
		"second S EH K AH N D", // a phrase's word: no truncated pronunciation
		"stop S T AA P", "stop(2) S T AA",
		"yeah Y AE",
		"the DH AH",
	}
	if !slices.Equal(got, want) {
		t.Errorf("dictionary:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := WriteDict(&b, Vocabulary{Common: []string{"nothing"}}, strings.NewReader(dict)); err == nil {
		t.Error("a dictionary that knows none of the vocabulary was accepted")
	}
}

// FuzzWriteDict: whatever the dictionary file holds, WriteDict returns an error or
// writes lines of a word and at least one phone.
func FuzzWriteDict(f *testing.F) {
	f.Add("stop S T AA P\nyeah Y AE\n")
	f.Add("stop(2) S T AA\n\n  \nyeah")
	f.Add("hold HH OW L D\x00\non AA N")
	f.Fuzz(func(t *testing.T, dict string) {
		var b strings.Builder
		v := Vocabulary{Backchannels: []string{"yeah"}, Interrupt: []string{"stop", "hold on"}, Common: []string{"on"}}
		if err := WriteDict(&b, v, strings.NewReader(dict)); err != nil {
			return
		}
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if len(strings.Fields(line)) < 2 {
				t.Fatalf("line %q of the output has no phones", line)
			}
		}
	})
}
