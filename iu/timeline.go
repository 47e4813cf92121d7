package iu

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// TimelineEntry is one line of a timeline: one update as one JSON object.
type TimelineEntry struct {
	// T is seconds since the timeline's start on the network's clock.
	T          float64    `json:"t"`
	Module     string     `json:"module"`
	IU         ID         `json:"iu"`
	Type       UpdateType `json:"type"`
	Kind       string     `json:"kind"`
	Previous   ID         `json:"previous,omitempty"`
	GroundedIn []ID       `json:"grounded_in,omitempty"`
	// Created is seconds since the timeline's start when the IU was made.
	Created float64 `json:"created"`
	Payload string  `json:"payload"`
}

// Timeline records every update of a network as JSON lines. One goroutine owns the
// writer; Observe hands it entries through a bounded channel, so a slow disk slows the
// network down instead of losing lines. Close flushes and reports the first write error.
type Timeline struct {
	start   time.Time
	entries chan []TimelineEntry
	done    chan error
}

// NewTimeline starts a timeline writing to w; times are measured from start.
func NewTimeline(w io.Writer, start time.Time) *Timeline {
	t := &Timeline{start: start, entries: make(chan []TimelineEntry, 256), done: make(chan error, 1)}
	go t.write(w)
	return t
}

func (t *Timeline) write(w io.Writer) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	var firstErr error
	for batch := range t.entries {
		if firstErr != nil {
			continue // keep draining so the network never blocks on a dead writer
		}
		for i := range batch {
			if err := enc.Encode(&batch[i]); err != nil {
				firstErr = fmt.Errorf("timeline: %w", err)
				break
			}
		}
		if len(t.entries) == 0 && firstErr == nil {
			if err := bw.Flush(); err != nil {
				firstErr = fmt.Errorf("timeline: %w", err)
			}
		}
	}
	if firstErr == nil {
		if err := bw.Flush(); err != nil {
			firstErr = fmt.Errorf("timeline: %w", err)
		}
	}
	t.done <- firstErr
}

// Observe implements Observer.
func (t *Timeline) Observe(at time.Time, m Message) {
	batch := make([]TimelineEntry, len(m.Updates))
	for i, up := range m.Updates {
		u := up.IU
		batch[i] = TimelineEntry{
			T:          at.Sub(t.start).Seconds(),
			Module:     m.From,
			IU:         u.ID,
			Type:       up.Type,
			Kind:       u.Payload.Kind(),
			Previous:   u.Previous,
			GroundedIn: u.GroundedIn,
			Created:    u.Created.Sub(t.start).Seconds(),
			Payload:    u.Payload.Summary(),
		}
	}
	t.entries <- batch
}

// Close stops the timeline after everything observed so far is written. Call it after
// the network's Run returned.
func (t *Timeline) Close() error {
	close(t.entries)
	return <-t.done
}

// ReadTimeline parses a timeline written by Timeline, for inspection and plotting. It
// holds every line in memory: a long session's timeline is better read with
// ScanTimeline.
func ReadTimeline(r io.Reader) ([]TimelineEntry, error) {
	var out []TimelineEntry
	err := ScanTimeline(r, func(e TimelineEntry) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// ScanTimeline parses a timeline written by Timeline line by line and hands each entry
// to fn, so that a timeline of any length is read in constant memory. It stops at the
// first line that does not parse, or the first error fn returns, and returns it.
func ScanTimeline(r io.Reader, fn func(TimelineEntry) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e TimelineEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("timeline line %d: %w", line, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("timeline line %d: %w", line+1, err)
	}
	return nil
}
