package plot

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/parley-voice/parley/iu"
)

func TestSVG(t *testing.T) {
	entries := []iu.TimelineEntry{
		{T: 0.00, Module: "mic", IU: "mic/1", Type: iu.Add, Kind: "audio", Payload: "a"},
		{T: 0.02, Module: "mic", IU: "mic/2", Type: iu.Add, Kind: "audio", Payload: "a"},
		{T: 0.50, Module: "asr", IU: "asr/1", Type: iu.Add, Kind: "word", Payload: "hello"},
		{T: 0.70, Module: "asr", IU: "asr/2", Type: iu.Add, Kind: "word", Payload: "word"},
		{T: 0.90, Module: "asr", IU: "asr/2", Type: iu.Revoke, Kind: "word", Payload: "word"},
		{T: 1.00, Module: "asr", IU: "asr/3", Type: iu.Add, Kind: "word", Payload: "world & <co>"},
		{T: 1.50, Module: "asr", IU: "asr/1", Type: iu.Commit, Kind: "word", Payload: "hello"},
		{T: 1.50, Module: "asr", IU: "asr/3", Type: iu.Commit, Kind: "word", Payload: "world & <co>"},
		{T: 1.60, Module: "llm", IU: "llm/1", Type: iu.Add, Kind: "clause", Payload: "Hi"},
		{T: 1.60, Module: "llm", IU: "llm/1", Type: iu.Commit, Kind: "clause", Payload: "Hi"},
	}
	var buf bytes.Buffer
	if err := SVG(&buf, entries, Options{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	// It must be well-formed XML (escaped labels included).
	dec := xml.NewDecoder(strings.NewReader(out))
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("not well-formed SVG: %v\n%s", err, out)
		}
	}
	for _, want := range []string{">mic<", ">asr<", ">llm<", "world &amp; &lt;co&gt;", "#f0a3a3" /* the revoked word */} {
		if !strings.Contains(out, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if strings.Count(out, "<rect") != 1+4+1+3+1 {
		t.Errorf("want 1 background, 4 legend swatches, 1 merged audio span, 3 words and 1 clause: got %d rects", strings.Count(out, "<rect"))
	}
}

func TestSVGEmpty(t *testing.T) {
	if err := SVG(&bytes.Buffer{}, nil, Options{}); err == nil {
		t.Fatal("want an error for an empty timeline")
	}
}

// TestSVGLegendAndLabelsFit: the plot says what its colours mean, and every label
// printed in a bar fits the bar (measured with the plot's own generous character
// width); a label cut short, and every other one, is whole in the bar's title.
func TestSVGLegendAndLabelsFit(t *testing.T) {
	long := "Once upon a time, there was a little girl named Lily who loved to play in the park"
	entries := []iu.TimelineEntry{
		{T: 0.00, Module: "a-module-with-a-very-long-name", IU: "m/1", Type: iu.Add, Kind: "clause", Payload: long},
		{T: 0.40, Module: "a-module-with-a-very-long-name", IU: "m/1", Type: iu.Commit, Kind: "clause", Payload: long},
		{T: 0.40, Module: "llm", IU: "l/1", Type: iu.Add, Kind: "clause", Payload: long},
		{T: 9.00, Module: "llm", IU: "l/1", Type: iu.Commit, Kind: "clause", Payload: long},
		{T: 9.00, Module: "asr", IU: "a/1", Type: iu.Add, Kind: "word", Payload: "tiny"},
		{T: 9.01, Module: "asr", IU: "a/1", Type: iu.Revoke, Kind: "word", Payload: "tiny"},
		{T: 9.50, Module: "mic", IU: "mic/1", Type: iu.Add, Kind: "audio", Payload: "a"},
	}
	var buf bytes.Buffer
	if err := SVG(&buf, entries, Options{Width: 600}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{">committed<", ">revoked<", ">open (not yet committed)<", "audio, played, progress (merged activity)<"} {
		if !strings.Contains(out, want) {
			t.Errorf("the legend lacks %q", want)
		}
	}
	// Walk the bars: <g><title>…</title><rect … width="W" …/><text …>LABEL</text></g>.
	type bar struct {
		Title string `xml:"title"`
		Rect  struct {
			Width float64 `xml:"width,attr"`
		} `xml:"rect"`
		Text *string `xml:"text"`
	}
	var doc struct {
		Bars  []bar `xml:"g"`
		Texts []struct {
			Title string `xml:"title"`
			Body  string `xml:",chardata"`
		} `xml:"text"`
	}
	if err := xml.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Bars) != 4 {
		t.Fatalf("%d bars, want 4", len(doc.Bars))
	}
	cut := 0
	for _, b := range doc.Bars {
		if !strings.Contains(b.Title, long) && !strings.Contains(b.Title, "tiny") && !strings.Contains(b.Title, "audio") {
			t.Errorf("title %q does not hold the whole label", b.Title)
		}
		if b.Text == nil {
			continue
		}
		if w := labelWidth(*b.Text); w > b.Rect.Width-4+0.01 {
			t.Errorf("label %q (%.0f px) overflows its bar of %.0f px", *b.Text, w, b.Rect.Width)
		}
		if strings.HasSuffix(*b.Text, "…") {
			cut++
		}
	}
	if cut == 0 {
		t.Error("no label was cut to fit")
	}
	named := false
	for _, txt := range doc.Texts {
		if txt.Title != "a-module-with-a-very-long-name" {
			continue
		}
		named = true
		if !strings.HasSuffix(txt.Body, "…") || float64(len([]rune(txt.Body)))*boldCharWidth > 130-12 {
			t.Errorf("the long module name is drawn as %q", txt.Body)
		}
	}
	if !named {
		t.Error("no row name with the long module name as its title")
	}
}

// TestSVGFromMatchesSVG: drawing a timeline while reading its JSON lines gives the same
// picture as drawing it from the entries in memory, and a line that does not parse is
// an error naming it.
func TestSVGFromMatchesSVG(t *testing.T) {
	entries := []iu.TimelineEntry{
		{T: 0.00, Module: "mic", IU: "mic/1", Type: iu.Add, Kind: "audio", Payload: "a"},
		{T: 0.02, Module: "mic", IU: "mic/1", Type: iu.Commit, Kind: "audio", Payload: "a"},
		{T: 0.50, Module: "asr", IU: "asr/1", Type: iu.Add, Kind: "word", Payload: "hello"},
		{T: 0.60, Module: "asr", IU: "asr/1", Type: iu.UpdatePayload, Kind: "word", Payload: "hello!"},
		{T: 0.70, Module: "asr", IU: "asr/2", Type: iu.Add, Kind: "word", Payload: "open"},
		{T: 0.90, Module: "asr", IU: "asr/1", Type: iu.Commit, Kind: "word", Payload: "hello!"},
		{T: 1.60, Module: "llm", IU: "llm/1", Type: iu.Add, Kind: "clause", Payload: "Hi"},
		{T: 1.60, Module: "llm", IU: "llm/1", Type: iu.Commit, Kind: "clause", Payload: "Hi"},
		{T: 2.00, Module: "llm", IU: "llm/2", Type: iu.Add, Kind: "clause", Payload: "there"},
	}
	var lines bytes.Buffer
	enc := json.NewEncoder(&lines)
	for _, e := range entries {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, opt := range []Options{{}, {Width: 500, From: 0.4, To: 1.8}} {
		var want, got bytes.Buffer
		if err := SVG(&want, entries, opt); err != nil {
			t.Fatal(err)
		}
		n, err := SVGFrom(&got, bytes.NewReader(lines.Bytes()), opt)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(entries) {
			t.Errorf("SVGFrom read %d updates, want %d", n, len(entries))
		}
		if got.String() != want.String() {
			t.Errorf("options %+v: SVGFrom drew\n%s\nSVG drew\n%s", opt, got.String(), want.String())
		}
	}
	bad := append(bytes.Clone(lines.Bytes()), "{not json\n"...)
	if _, err := SVGFrom(&bytes.Buffer{}, bytes.NewReader(bad), Options{}); err == nil || !strings.Contains(err.Error(), "line 10") {
		t.Errorf("a broken line 10 gave %v", err)
	}
	if _, err := SVGFrom(&bytes.Buffer{}, strings.NewReader(""), Options{}); err == nil {
		t.Error("want an error for an empty timeline")
	}
}

// TestDrawingHoldsIUsNotUpdates: an hour of audio frames and progress reports, with a
// pause in the middle, is drawn as a few merged spans, so that a drawing of a long
// session holds what happened in it rather than one record per update.
func TestDrawingHoldsIUsNotUpdates(t *testing.T) {
	d := NewDrawing(Options{})
	const frames = 180_000 // an hour of 20 ms frames
	for i := range frames {
		at := float64(i) * 0.02
		if i >= frames/2 {
			at += 10 // the microphone stopped for 10 s
		}
		id := iu.ID(fmt.Sprintf("mic/%d", i+1))
		d.Add(iu.TimelineEntry{T: at, Module: "mic", IU: id, Type: iu.Add, Kind: "audio", Payload: "a"})
		d.Add(iu.TimelineEntry{T: at, Module: "mic", IU: id, Type: iu.Commit, Kind: "audio", Payload: "a"})
		if i%10 == 0 {
			d.Add(iu.TimelineEntry{T: at, Module: "speaker", IU: iu.ID(fmt.Sprintf("speaker/%d", i+1)), Type: iu.Add, Kind: "progress", Payload: "p"})
		}
	}
	d.Add(iu.TimelineEntry{T: 3700, Module: "asr", IU: "asr/1", Type: iu.Add, Kind: "word", Payload: "late"})
	if got := len(d.rows["mic"]); got != 2 {
		t.Errorf("the microphone's frames are %d spans, want 2 (before and after the pause)", got)
	}
	if got := len(d.rows["speaker"]); got != 2 {
		t.Errorf("the progress reports are %d spans, want 2", got)
	}
	if len(d.open) != 1 {
		t.Errorf("%d IUs kept as open, want 1 (the word)", len(d.open))
	}
	if d.Updates() != 2*frames+frames/10+1 {
		t.Errorf("Updates() = %d", d.Updates())
	}
	if err := d.WriteSVG(&bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
}
