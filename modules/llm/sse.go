package llm

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// sseEvent is one server-sent event.
type sseEvent struct {
	Event string // the "event:" field; "" means "message"
	Data  string // the "data:" lines joined with "\n"
}

// errSSELineTooLong means a line of the event stream exceeded the reader's limit.
var errSSELineTooLong = errors.New("llm: server-sent event line too long")

// sseReader parses a text/event-stream (the WHATWG server-sent events format) as
// OpenAI-compatible servers stream it. Comments, "id:" and "retry:" are ignored.
type sseReader struct {
	r       *bufio.Reader
	maxLine int
	line    []byte
}

func newSSEReader(r io.Reader, maxLine int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 16<<10), maxLine: maxLine}
}

// readLine returns the next line without its terminator (LF or CRLF; a lone CR also
// ends a line, as the format allows). At the end of the stream it returns the last,
// unterminated line with io.EOF.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		b, err := s.r.ReadByte()
		if err != nil {
			return s.line, err
		}
		switch b {
		case '\n':
			return s.line, nil
		case '\r':
			if next, err := s.r.Peek(1); err == nil && next[0] == '\n' {
				s.r.ReadByte()
			}
			return s.line, nil
		}
		if len(s.line) >= s.maxLine {
			return nil, fmt.Errorf("%w (over %d bytes)", errSSELineTooLong, s.maxLine)
		}
		s.line = append(s.line, b)
	}
}

// Next returns the next event. At the end of the stream it returns io.EOF; an event
// cut off by the end of the stream (no blank line after it) is dropped, as the format
// requires, and reported as io.ErrUnexpectedEOF.
func (s *sseReader) Next() (sseEvent, error) {
	var ev sseEvent
	var data strings.Builder
	hasData, pending := false, false
	for {
		line, err := s.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return sseEvent{}, err
		}
		eof := errors.Is(err, io.EOF)
		if eof && len(line) == 0 {
			if pending {
				return sseEvent{}, io.ErrUnexpectedEOF
			}
			return sseEvent{}, io.EOF
		}
		if len(line) == 0 {
			if hasData {
				ev.Data = data.String()
				return ev, nil
			}
			// A blank line without data dispatches nothing.
			ev, pending = sseEvent{}, false
			continue
		}
		if line[0] != ':' { // lines starting with ':' are comments (keep-alives)
			pending = true
			field, value, found := bytes.Cut(line, []byte{':'})
			if found {
				value = bytes.TrimPrefix(value, []byte{' '})
			}
			switch string(field) {
			case "data":
				if hasData {
					data.WriteByte('\n')
				}
				data.Write(value)
				hasData = true
			case "event":
				ev.Event = string(value)
			}
		}
		if eof {
			return sseEvent{}, io.ErrUnexpectedEOF
		}
	}
}
