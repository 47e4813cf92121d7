package asr

import "testing"

// TestPartialServes: a partial is an utterance's final only with quick finals on, once
// it is done, and when it decoded the audio up to the speech's end or beyond.
func TestPartialServes(t *testing.T) {
	done := func(end int64) partialDecode { return partialDecode{end: end, done: true} }
	tests := []struct {
		name      string
		quick     bool
		p         partialDecode
		speechEnd int64
		want      bool
	}{
		{"decoded past the speech", true, done(20000), 19000, true},
		{"decoded exactly to its end", true, done(19000), 19000, true},
		{"stopped short of the speech's end", true, done(18999), 19000, false},
		{"no partial yet", true, partialDecode{}, 19000, false},
		{"full finals", false, done(20000), 19000, false},
		{"speech end unknown", true, done(20000), -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := partialServes(tt.quick, tt.p, tt.speechEnd); got != tt.want {
				t.Errorf("partialServes(%v, %+v, %d) = %v, want %v", tt.quick, tt.p, tt.speechEnd, got, tt.want)
			}
		})
	}
}

// TestPartialAtPause: a partial runs at once at a pause when the audio received covers
// the speech's end and the audio fed does not, with quick finals only.
func TestPartialAtPause(t *testing.T) {
	tests := []struct {
		name                 string
		quick, paused        bool
		fed, recv, speechEnd int64
		want                 bool
	}{
		{"paused, speech end received, not fed", true, true, 16000, 20000, 19000, true},
		{"speech end not received yet", true, true, 16000, 18000, 19000, false},
		{"speech end fed already", true, true, 19000, 20000, 19000, false},
		{"not paused", true, false, 16000, 20000, 19000, false},
		{"full finals", false, true, 16000, 20000, 19000, false},
		{"no speech end", true, true, 16000, 20000, -1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := partialAtPause(tt.quick, tt.paused, tt.fed, tt.recv, tt.speechEnd); got != tt.want {
				t.Errorf("partialAtPause = %v, want %v", got, tt.want)
			}
		})
	}
}
