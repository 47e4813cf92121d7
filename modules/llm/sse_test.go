package llm

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func readEvents(r io.Reader) ([]sseEvent, error) {
	s := newSSEReader(r, 1<<10)
	var out []sseEvent
	for {
		ev, err := s.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []sseEvent
		wantErr error
	}{
		{"openai stream", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []sseEvent{{Data: `{"a":1}`}, {Data: "[DONE]"}}, nil},
		{"CRLF", "data: x\r\n\r\ndata: y\r\n\r\n", []sseEvent{{Data: "x"}, {Data: "y"}}, nil},
		{"lone CR", "data: x\r\rdata: y\r\r", []sseEvent{{Data: "x"}, {Data: "y"}}, nil},
		{"multi-line data", "data: a\ndata: b\n\n", []sseEvent{{Data: "a\nb"}}, nil},
		{"no space after colon", "data:x\n\n", []sseEvent{{Data: "x"}}, nil},
		{"only one space stripped", "data:  x\n\n", []sseEvent{{Data: " x"}}, nil},
		{"event type", "event: error\ndata: {\"message\":\"boom\"}\n\n", []sseEvent{{Event: "error", Data: `{"message":"boom"}`}}, nil},
		{"comments and ids", ": keep-alive\nid: 7\nretry: 100\ndata: x\n\n: bye\n", []sseEvent{{Data: "x"}}, nil},
		{"blank lines between", "\n\n\ndata: x\n\n\n\n", []sseEvent{{Data: "x"}}, nil},
		{"event without data dropped", "event: ping\n\ndata: x\n\n", []sseEvent{{Data: "x"}}, nil},
		{"empty data", "data:\n\n", []sseEvent{{Data: ""}}, nil},
		{"unterminated event", "data: x\n\ndata: cut", []sseEvent{{Data: "x"}}, io.ErrUnexpectedEOF},
		{"unterminated event with newline", "data: x\n\ndata: cut\n", []sseEvent{{Data: "x"}}, io.ErrUnexpectedEOF},
		{"empty stream", "", nil, nil},
		{"line too long", "data: " + strings.Repeat("x", 2000) + "\n\n", nil, errSSELineTooLong},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := readEvents(r)
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("events %q, want %q", got, tc.want)
				}
				if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want %v", err, tc.wantErr)
				}
			}
		})
	}
	// A read error is passed on.
	boom := errors.New("connection reset")
	_, err := readEvents(io.MultiReader(strings.NewReader("data: x\n\n"), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add("data: {\"a\":1}\n\ndata: [DONE]\n\n")
	f.Add("event: error\r\ndata: x\r\n\r\n: c\rdata:y\r\r")
	f.Add("data: a\ndata: b\n\nid\nretry\ndata")
	f.Fuzz(func(t *testing.T, in string) {
		whole, errWhole := readEvents(strings.NewReader(in))
		bytewise, errBytes := readEvents(iotest.OneByteReader(strings.NewReader(in)))
		if !reflect.DeepEqual(whole, bytewise) || (errWhole == nil) != (errBytes == nil) {
			t.Fatalf("whole: %q %v; byte by byte: %q %v", whole, errWhole, bytewise, errBytes)
		}
		// Events re-encoded in the canonical form parse back to the same events.
		var sb strings.Builder
		for _, ev := range whole {
			if ev.Event != "" {
				sb.WriteString("event: " + ev.Event + "\n")
			}
			for _, line := range strings.Split(ev.Data, "\n") {
				sb.WriteString("data: " + line + "\n")
			}
			sb.WriteString("\n")
		}
		again, err := readEvents(strings.NewReader(sb.String()))
		if err == nil && !reflect.DeepEqual(again, whole) {
			t.Fatalf("re-encoded %q parsed as %q, want %q", sb.String(), again, whole)
		}
	})
}
