package plot

import (
	"bytes"
	"encoding/xml"
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
