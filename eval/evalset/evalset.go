// Package evalset generates the evaluation's scenario set (configs/eval): scenarios of a
// user who hesitates, lists, trails off, asks twice, backchannels, coughs and knocks,
// barges in early and late, and starts again just as the agent starts, in flite,
// festival and espeak-ng voices with their pitch and rate varied. Each scenario is a
// scenario file (modules/source) whose recordings are made at replay time (a voice
// that says their words, or a synthesised sound) and whose events say what each
// recording is to the conversation, which is what agent eval scores. scripts/eval-set
// writes the set; a test checks that the committed one is what Generate makes.
package evalset

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/parley-voice/parley/audio/voices"
)

// File is one generated file of the set.
type File struct {
	Name string
	Data []byte
}

// CIList is the file that lists the scenarios CI runs (one file name a line).
const CIList = "ci.list"

// fallback is where a recording placed after the agent plays if the agent's turn never
// became audible: long after every pipeline has answered the scenarios' first question.
const fallback = "20"

// A voice of the user's, shifted.
type voice struct {
	name  string // engine:name
	pitch float64
	rate  float64
}

// The voices the users speak in: Debian's flite, festival and espeak-ng voices, none of
// them the agent's (espeak-ng en-us) or the voice a scenario's absent recordings are
// spoken in (en-us+m1).
var voiceNames = []string{
	"flite:slt", "flite:rms", "flite:awb", "flite:kal",
	"festival:kal_diphone", "festival:cmu_us_slt_arctic_hts",
	"espeak-ng:en-gb-scotland", "espeak-ng:en-us+f3", "espeak-ng:en-gb-x-rp+m3", "espeak-ng:en-029+f2", "espeak-ng:en-gb+m7",
}

// The shifts, cycled with periods prime to the voices' so that the combinations vary.
var (
	pitches = []float64{0, 2, -2, 1, -1, 3, -3}
	rates   = []float64{1, 0.9, 1.1, 0.95, 1.05, 0.85, 1.15, 0.9, 1}
)

// gen builds the set; n counts the scenarios, which picks each one's voice.
type gen struct {
	n     int
	files []File
	ci    []string
}

func (g *gen) voice() voice {
	v := voice{name: voiceNames[g.n%len(voiceNames)], pitch: pitches[g.n%len(pitches)], rate: rates[g.n%len(rates)]}
	g.n++
	return v
}

// scenario is a scenario being written.
type scenario struct {
	name, description string
	tail              float64
	b                 strings.Builder
}

func newScenario(name, description string) *scenario {
	return &scenario{name: name, description: description, tail: 4}
}

// rec is one recording: said in a voice, a part of a sentence said in a voice, or a
// sound; placed at a time, after the previous recording's speech, or after the agent's
// turn cue (1-based) by offset.
type rec struct {
	says          string
	sentence      string // with its cuts marked (voices.CutMark), and part counted from 1
	part          int
	v             voice
	sound         string // a sound block in flow style
	at            string // seconds
	afterPrevious bool
	after         time.Duration
	cue           int
	offset        time.Duration
	role          string
	event         string
}

func (s *scenario) add(r rec) {
	b := &s.b
	switch {
	case r.sound != "":
		fmt.Fprintf(b, "  - sound: %s\n", r.sound)
	case r.sentence != "":
		fmt.Fprintf(b, "  - sentence: %q\n    part: %d\n", r.sentence, r.part)
	default:
		fmt.Fprintf(b, "  - says: %q\n", r.says)
	}
	if r.sound == "" {
		fmt.Fprintf(b, "    voice: %s\n", r.v.name)
		if r.v.pitch != 0 {
			fmt.Fprintf(b, "    pitch: %s\n", num(r.v.pitch))
		}
		if r.v.rate != 1 {
			fmt.Fprintf(b, "    rate: %s\n", num(r.v.rate))
		}
	}
	switch {
	case r.afterPrevious:
		fmt.Fprintf(b, "    after_previous: %s\n", dur(r.after))
	case r.cue > 0:
		fmt.Fprintf(b, "    after_agent: {turn: %d, offset: %s}\n    at: %s\n", r.cue, dur(r.offset), fallback)
	default:
		fmt.Fprintf(b, "    at: %s\n", r.at)
	}
	role := r.role
	if role == "" {
		role = "user"
	}
	fmt.Fprintf(b, "    role: %s\n", role)
	if r.event != "" {
		fmt.Fprintf(b, "    event: %s\n", r.event)
	}
}

// sentence returns the recordings of a turn spoken as one sentence and cut into parts
// with a pause after each but the last: the first at at, each other after the previous
// by its pause; the last ends the turn, the others are pauses.
func sentence(v voice, at string, pauses []time.Duration, parts ...string) []rec {
	marked := strings.Join(parts, " "+voices.CutMark+" ")
	var recs []rec
	for i := range parts {
		r := rec{sentence: marked, part: i + 1, v: v, event: "pause"}
		if i == 0 {
			r.at = at
		} else {
			r.afterPrevious, r.after = true, pauses[i-1]
		}
		if i == len(parts)-1 {
			r.event = "turn-end"
		}
		recs = append(recs, r)
	}
	return recs
}

func (s *scenario) addAll(recs []rec) {
	for _, r := range recs {
		s.add(r)
	}
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func dur(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

const header = "# Generated by scripts/eval-set (eval/evalset): change the generator and run it again\n# rather than editing this file. docs/EVAL.md says what agent eval scores.\n"

func (g *gen) emit(s *scenario, ci bool) {
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, "name: %s\ndescription: %q\ntail: %s\nrecordings:\n", s.name, s.description, num(s.tail))
	b.WriteString(s.b.String())
	file := s.name + ".yaml"
	g.files = append(g.files, File{Name: file, Data: []byte(b.String())})
	if ci {
		g.ci = append(g.ci, file)
	}
}

// Generate returns the set's files: a scenario file for each scenario, and CIList.
func Generate() []File {
	g := &gen{}
	g.smooth()
	g.hesitations()
	g.lists()
	g.trailing()
	g.twoQuestions()
	g.backchannels()
	g.noises()
	g.room()
	g.bargeIns()
	g.restarts()
	g.files = append(g.files, File{Name: CIList, Data: []byte("# The scenarios CI runs (eval/evalrun's test); generated with the set.\n" + strings.Join(g.ci, "\n") + "\n")})
	return g.files
}

// The questions a user asks to get the agent talking.
var questions = []string{
	"what time is it", "can you tell me a story", "what is the weather like today", "how far away is the moon",
	"tell me about dragons", "what should i cook for dinner", "why is the sky blue", "who lives in the castle",
	"where do penguins live", "how do birds fly",
}

func question(i int) string { return questions[i%len(questions)] }

// smooth: two questions a user asks, each after the agent has answered the one before:
// each turn's end is a smooth turn-taking.
func (g *gen) smooth() {
	for i := range 8 {
		v := g.voice()
		s := newScenario(fmt.Sprintf("smooth-%02d", i+1), "two questions, the second long after the agent answered the first")
		s.add(rec{says: question(i), v: v, at: "0.5", event: "turn-end"})
		s.add(rec{says: question(i + 5), v: v, at: "10", event: "turn-end"})
		g.emit(s, i < 2)
	}
}

// hesitations: a request cut by a hesitation of 300–900 ms, filled ("um", "uh") or
// silent, then finished. Each is one sentence, cut where the speaker pauses; the commas
// make the voices go on there rather than end.
func (g *gen) hesitations() {
	filled := [][2]string{
		{"i would like, uh,", "a cup of tea"}, {"can you, um,", "tell me a story"}, {"what about, uh,", "the weather tomorrow"},
		{"play me some, um,", "quiet music"}, {"i think i need, uh,", "a new umbrella"}, {"set a timer for, um,", "ten minutes"},
		{"where did i put, uh,", "my keys"}, {"tell me about, um,", "the moon"},
	}
	pauses := []time.Duration{300, 450, 600, 750, 900, 400, 550, 800}
	for i, p := range filled {
		v := g.voice()
		s := newScenario(fmt.Sprintf("hesitation-filled-%02d", i+1), fmt.Sprintf("a filled hesitation and a pause of %v before the rest of the request", pauses[i]*time.Millisecond))
		s.addAll(sentence(v, "0.5", []time.Duration{pauses[i] * time.Millisecond}, p[0], p[1]))
		g.emit(s, i == 2)
	}
	silent := [][2]string{
		{"can you tell me,", "a story about a dragon"}, {"i want to know,", "how far away the moon is"}, {"please turn off,", "the kitchen light"},
		{"what is the name of,", "that song"}, {"remind me to call,", "my sister tonight"}, {"how long does it take,", "to boil an egg"},
	}
	spause := []time.Duration{350, 500, 650, 900, 300, 750}
	for i, p := range silent {
		v := g.voice()
		s := newScenario(fmt.Sprintf("hesitation-silent-%02d", i+1), fmt.Sprintf("a silent hesitation of %v mid-sentence", spause[i]*time.Millisecond))
		s.addAll(sentence(v, "0.5", []time.Duration{spause[i] * time.Millisecond}, p[0], p[1]))
		g.emit(s, i == 1)
	}
}

// lists: a list spoken as one sentence with a pause after each item.
func (g *gen) lists() {
	lists := [][3]string{
		{"i need eggs,", "milk,", "and some bread"}, {"pack a hat,", "a scarf,", "and warm gloves"},
		{"call my mother,", "then my father,", "and then my brother"}, {"we saw a fox,", "a deer,", "and two owls"},
		{"add apples,", "pears,", "and a melon"}, {"the story needs a king,", "a dragon,", "and a brave girl"},
	}
	pauses := [][2]time.Duration{{400, 500}, {600, 450}, {500, 700}, {800, 400}, {450, 650}, {700, 800}}
	for i, l := range lists {
		v := g.voice()
		s := newScenario(fmt.Sprintf("list-%02d", i+1), fmt.Sprintf("a list with pauses of %v and %v between its items", pauses[i][0]*time.Millisecond, pauses[i][1]*time.Millisecond))
		s.addAll(sentence(v, "0.5", []time.Duration{pauses[i][0] * time.Millisecond, pauses[i][1] * time.Millisecond}, l[0], l[1], l[2]))
		g.emit(s, i == 0)
	}
}

// trailing: a turn that trails off on "and", "the" or "to", and goes on after a pause:
// one sentence, a comma where it trails off.
func (g *gen) trailing() {
	parts := [][2]string{
		{"put the cups on the,", "table"}, {"i want to go to,", "the beach"}, {"bring me the bread and,", "the butter"},
		{"turn on the,", "living room lamp"}, {"we should walk to,", "the park"}, {"read me the story and,", "sing a song"},
	}
	pauses := []time.Duration{600, 800, 500, 900, 700, 650}
	for i, p := range parts {
		v := g.voice()
		last := strings.TrimSuffix(p[0][strings.LastIndex(p[0], " ")+1:], ",")
		s := newScenario(fmt.Sprintf("trailing-%02d", i+1), fmt.Sprintf("a turn that trails off on %q and goes on after %v", last, pauses[i]*time.Millisecond))
		s.addAll(sentence(v, "0.5", []time.Duration{pauses[i] * time.Millisecond}, p[0], p[1]))
		g.emit(s, i == 3)
	}
}

// twoQuestions: a question followed by a second one: asked while the agent answers the
// first, or after a pause in which the agent may answer or wait.
func (g *gen) twoQuestions() {
	pairs := [][2]string{
		{"what time is it", "and what day is it"}, {"how far is the moon", "and how far is the sun"},
		{"who is the king", "and where does he live"}, {"what is a dragon", "and can it fly"},
	}
	for i, p := range pairs {
		v := g.voice()
		if i%2 == 0 {
			offset := []time.Duration{1600, 1900}[i/2] * time.Millisecond
			s := newScenario(fmt.Sprintf("two-questions-%02d", i+1), fmt.Sprintf("a second question %v into the agent's answer to the first", offset))
			s.add(rec{says: p[0], v: v, at: "0.5", event: "turn-end"})
			s.add(rec{says: p[1], v: v, cue: 1, offset: offset, event: "interruption"})
			s.tail = 5
			g.emit(s, i == 0)
			continue
		}
		// After a pause the agent may answer the first question or wait for both: only
		// the second's end is sure to be the turn's. The two are said in one go, as a
		// speaker who adds a question does.
		gap := []time.Duration{1000, 1300}[i/2] * time.Millisecond
		s := newScenario(fmt.Sprintf("two-questions-%02d", i+1), fmt.Sprintf("a second question %v after the first", gap))
		both := sentence(v, "0.5", []time.Duration{gap}, p[0]+"?", p[1]+"?")
		both[0].event = ""
		s.addAll(both)
		g.emit(s, false)
	}
}

// questionEnd is the question's event when a sound follows offset into the agent's
// answer: a turn-end only when the answer has had time to pass the takeover test on its
// own before the sound (a second and a half), so that a sound's takeover is not counted
// twice.
func questionEnd(offset time.Duration) string {
	if offset >= 1500*time.Millisecond {
		return "turn-end"
	}
	return ""
}

// backchannels: a backchannel, said or hummed, at different points of the agent's
// answer.
func (g *gen) backchannels() {
	wordsSaid := []string{"yeah", "okay", "right", "uh-huh", "mm-hmm", "i see", "sure", "yes"}
	offsets := []time.Duration{300, 700, 1100, 1500, 1800, 500, 900, 1600}
	for i, w := range wordsSaid {
		v := g.voice()
		off := offsets[i] * time.Millisecond
		s := newScenario(fmt.Sprintf("backchannel-word-%02d", i+1), fmt.Sprintf("%q %v into the agent's answer", w, off))
		s.add(rec{says: question(i), v: v, at: "0.5", event: questionEnd(off)})
		s.add(rec{says: w, v: v, cue: 1, offset: off, event: "backchannel"})
		g.emit(s, i == 0 || i == 4)
	}
	hums := []struct {
		shape string
		pitch int
	}{{"mm-hmm", 110}, {"hmm", 150}, {"mhm", 190}, {"mm-hmm", 210}, {"hmm", 95}, {"mhm", 130}}
	hoff := []time.Duration{400, 800, 1200, 1600, 600, 1000}
	for i, h := range hums {
		v := g.voice()
		off := hoff[i] * time.Millisecond
		s := newScenario(fmt.Sprintf("backchannel-hum-%02d", i+1), fmt.Sprintf("a hummed %s at %d Hz %v into the agent's answer", h.shape, h.pitch, off))
		s.add(rec{says: question(i + 3), v: v, at: "0.5", event: questionEnd(off)})
		s.add(rec{sound: fmt.Sprintf("{kind: hum, shape: %s, pitch: %d}", h.shape, h.pitch), cue: 1, offset: off, event: "backchannel"})
		g.emit(s, i == 2)
	}
}

// noises: coughs, knocks and bursts of noise over the agent's answer.
func (g *gen) noises() {
	sounds := []struct{ label, block string }{
		{"a cough", "{kind: cough, seed: 1}"}, {"a double cough", "{kind: cough, seed: 2}"},
		{"two knocks", "{kind: knock, seed: 3, count: 2}"}, {"three knocks", "{kind: knock, seed: 5, count: 3}"},
		{"a 150 ms burst of noise", "{kind: noise, seed: 1, length: 150ms}"}, {"a 400 ms burst of noise", "{kind: noise, seed: 2, length: 400ms, level: 0.3}"},
		{"a cough", "{kind: cough, seed: 3}"}, {"a knock", "{kind: knock, seed: 7, count: 1}"},
	}
	offsets := []time.Duration{400, 900, 1300, 1700, 600, 1100, 1500, 800}
	for i, snd := range sounds {
		v := g.voice()
		off := offsets[i] * time.Millisecond
		s := newScenario(fmt.Sprintf("noise-%02d", i+1), fmt.Sprintf("%s %v into the agent's answer", snd.label, off))
		s.add(rec{says: question(i + 1), v: v, at: "0.5", event: questionEnd(off)})
		s.add(rec{sound: snd.block, cue: 1, offset: off, event: "noise"})
		g.emit(s, i == 1)
	}
}

// room: a room's steady noise under the whole conversation.
func (g *gen) room() {
	bed := func(seed int, level string) rec {
		return rec{sound: fmt.Sprintf("{kind: room, seed: %d, length: 16s, level: %s}", seed, level), at: "0", role: "background"}
	}
	levels := []string{"0.005", "0.01", "0.02", "0.01"}
	for i := range 4 {
		v := g.voice()
		var s *scenario
		switch i {
		case 0:
			s = newScenario("room-01", "a question and another, in a room's steady noise")
			s.add(bed(i+1, levels[i]))
			s.add(rec{says: question(i + 2), v: v, at: "0.5", event: "turn-end"})
			s.add(rec{says: question(i + 7), v: v, at: "10", event: "turn-end"})
		case 1:
			s = newScenario("room-02", "a cough 900 ms into the agent's answer, in a room's steady noise")
			s.add(bed(i+1, levels[i]))
			s.add(rec{says: question(i + 2), v: v, at: "0.5"})
			s.add(rec{sound: "{kind: cough, seed: 4}", cue: 1, offset: 900 * time.Millisecond, event: "noise"})
		case 2:
			s = newScenario("room-03", "a hesitation of 600 ms in a room's steady noise")
			s.add(bed(i+1, levels[i]))
			s.addAll(sentence(v, "0.5", []time.Duration{600 * time.Millisecond}, "i would like to hear,", "a song about the sea"))
		case 3:
			s = newScenario("room-04", "a barge-in 1 s into the agent's answer, in a room's steady noise")
			s.add(bed(i+1, levels[i]))
			s.add(rec{says: question(i + 2), v: v, at: "0.5"})
			s.add(rec{says: "wait, stop", v: v, cue: 1, offset: time.Second, event: "interruption"})
		}
		g.emit(s, i == 3)
	}
}

// bargeIns: the user interrupts the agent's answer in its first 300 ms, or later.
func (g *gen) bargeIns() {
	phrases := []string{"wait, stop", "stop", "no, not that one", "hold on a second", "actually, tell me about the moon",
		"no no, wait", "sorry, what did you say", "stop please"}
	early := []time.Duration{100, 150, 200, 250, 280, 120}
	for i, off := range early {
		v := g.voice()
		off *= time.Millisecond
		s := newScenario(fmt.Sprintf("barge-in-early-%02d", i+1), fmt.Sprintf("%q %v into the agent's answer", phrases[i], off))
		s.add(rec{says: question(i + 4), v: v, at: "0.5"})
		s.add(rec{says: phrases[i], v: v, cue: 1, offset: off, event: "interruption"})
		s.tail = 5
		g.emit(s, i == 2)
	}
	late := []time.Duration{500, 800, 1000, 1200, 1400, 1600, 1800, 2000}
	for i, off := range late {
		v := g.voice()
		off *= time.Millisecond
		p := phrases[(i+3)%len(phrases)]
		s := newScenario(fmt.Sprintf("barge-in-late-%02d", i+1), fmt.Sprintf("%q %v into the agent's answer", p, off))
		s.add(rec{says: question(i + 6), v: v, at: "0.5", event: questionEnd(off)})
		s.add(rec{says: p, v: v, cue: 1, offset: off, event: "interruption"})
		s.tail = 5
		g.emit(s, i == 3)
	}
}

// restarts: the user starts again just as the agent starts to answer.
func (g *gen) restarts() {
	pairs := [][2]string{
		{"tell me a story", "about a brave knight"}, {"what is the weather", "in paris tomorrow"},
		{"play some music", "something calm please"}, {"how do i bake bread", "without any yeast"},
	}
	offsets := []time.Duration{30, 50, 70, 40}
	for i, p := range pairs {
		v := g.voice()
		off := offsets[i] * time.Millisecond
		s := newScenario(fmt.Sprintf("restart-%02d", i+1), fmt.Sprintf("the user goes on %v after the agent starts to answer", off))
		s.add(rec{says: p[0], v: v, at: "0.5"})
		s.add(rec{says: p[1], v: v, cue: 1, offset: off, event: "interruption"})
		s.tail = 5
		g.emit(s, i == 0)
	}
}
