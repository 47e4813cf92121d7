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
	if strings.Count(out, "<rect") != 1+1+3+1 {
		t.Errorf("want 1 background, 1 merged audio span, 3 words and 1 clause: got %d rects", strings.Count(out, "<rect"))
	}
}

func TestSVGEmpty(t *testing.T) {
	if err := SVG(&bytes.Buffer{}, nil, Options{}); err == nil {
		t.Fatal("want an error for an empty timeline")
	}
}
