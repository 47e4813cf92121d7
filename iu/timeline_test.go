package iu

import (
	"errors"
	"strings"
	"testing"
)

// TestScanTimeline: the scanner hands over the lines one by one, skips empty ones,
// stops at the first error its callback returns, and names a line that does not parse.
func TestScanTimeline(t *testing.T) {
	const lines = `{"t":0.5,"module":"asr","iu":"asr/1","type":"add","kind":"word","created":0.5,"payload":"hi"}

{"t":0.7,"module":"asr","iu":"asr/1","type":"commit","kind":"word","created":0.5,"payload":"hi"}
{"t":0.9,"module":"asr","iu":"asr/2","type":"add","kind":"word","created":0.9,"payload":"there"}
`
	stop := errors.New("enough")
	tests := []struct {
		name    string
		input   string
		stopAt  int // the callback fails at this entry (0: never)
		want    []UpdateType
		wantErr string
	}{
		{name: "all", input: lines, want: []UpdateType{Add, Commit, Add}},
		{name: "stopped by the callback", input: lines, stopAt: 2, want: []UpdateType{Add, Commit}, wantErr: "enough"},
		{name: "broken line", input: lines + "{\"t\":\n", want: []UpdateType{Add, Commit, Add}, wantErr: "timeline line 5"},
		{name: "unknown update type", input: `{"t":1,"type":"replace"}`, wantErr: "timeline line 1"},
		{name: "empty", input: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []UpdateType
			err := ScanTimeline(strings.NewReader(tc.input), func(e TimelineEntry) error {
				got = append(got, e.Type)
				if len(got) == tc.stopAt {
					return stop
				}
				return nil
			})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one with %q", err, tc.wantErr)
			}
			if tc.stopAt > 0 && !errors.Is(err, stop) {
				t.Errorf("the callback's error is not returned as it is: %v", err)
			}
			if strings.Join(typeNames(got), ",") != strings.Join(typeNames(tc.want), ",") {
				t.Errorf("entries %v, want %v", got, tc.want)
			}
		})
	}
}

func typeNames(ts []UpdateType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.String()
	}
	return out
}
