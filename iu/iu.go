// Package iu implements incremental units (IUs) and the runtime that connects the modules
// of a Parley network, in the style of retico: modules exchange batches of ADD, UPDATE,
// REVOKE and COMMIT updates over channels, one goroutine per module.
//
// Rules every consumer can rely on:
//   - an IU is ADDed before any other update about it, and at most once;
//   - a revoked IU is never committed, and a committed one is never revoked or changed
//     (the runtime rejects such updates with an error that stops the network);
//   - updates from one producer arrive in the order they were sent;
//   - sending blocks while a consumer's inbox is full (back-pressure): the runtime never
//     queues without bound and never drops an update. Modules that capture audio in real
//     time decide their own drop policy before the network (see modules/mic).
//
// IUs are values. A payload must not be modified after the IU carrying it was sent,
// because every consumer of the producer sees the same payload.
package iu

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ID names an IU uniquely within a network: "creator/sequence".
type ID string

// Creator returns the module that created the IU.
func (id ID) Creator() string {
	if i := strings.LastIndexByte(string(id), '/'); i >= 0 {
		return string(id[:i])
	}
	return ""
}

// Seq returns the IU's sequence number within its creator.
func (id ID) Seq() uint64 {
	i := strings.LastIndexByte(string(id), '/')
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseUint(string(id[i+1:]), 10, 64)
	return n
}

func makeID(creator string, seq uint64) ID {
	return ID(creator + "/" + strconv.FormatUint(seq, 10))
}

// Payload is what an IU carries. Kind names the payload type ("audio", "word", ...);
// Summary is a short human-readable description for timelines and logs.
type Payload interface {
	Kind() string
	Summary() string
}

// State is where an IU is in its life.
type State uint8

const (
	// Open IUs may still be updated, committed or revoked.
	Open State = iota
	// Committed IUs are final.
	Committed
	// Revoked IUs are withdrawn; they are never committed.
	Revoked
)

func (s State) String() string {
	switch s {
	case Open:
		return "open"
	case Committed:
		return "committed"
	case Revoked:
		return "revoked"
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// IU is an incremental unit.
type IU struct {
	ID ID
	// Creator is the name of the module that made the IU.
	Creator string
	// Previous is the creator's IU before this one in its chain (for example the previous
	// word), or "" for the first.
	Previous ID
	// GroundedIn names the IUs this one was derived from (audio frames for a word, the
	// user's utterance for a reply).
	GroundedIn []ID
	Payload    Payload
	// Created is the creator's clock reading when the IU was made (monotonic on the real clock).
	Created time.Time
	// State is the IU's state after the update that carries it.
	State State
}

// UpdateType is what an update does to an IU.
type UpdateType uint8

const (
	// Add introduces a new IU.
	Add UpdateType = iota + 1
	// UpdatePayload replaces an open IU's payload (the UPDATE of the IU model).
	UpdatePayload
	// Revoke withdraws an open IU.
	Revoke
	// Commit makes an open IU final.
	Commit
)

var updateNames = [...]string{Add: "add", UpdatePayload: "update", Revoke: "revoke", Commit: "commit"}

func (t UpdateType) String() string {
	if int(t) < len(updateNames) && updateNames[t] != "" {
		return updateNames[t]
	}
	return "update(" + strconv.Itoa(int(t)) + ")"
}

// MarshalText writes the update type in lower case, as the timeline shows it.
func (t UpdateType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses what MarshalText writes.
func (t *UpdateType) UnmarshalText(b []byte) error {
	for i, n := range updateNames {
		if n != "" && n == string(b) {
			*t = UpdateType(i)
			return nil
		}
	}
	return fmt.Errorf("iu: unknown update type %q", b)
}

// An Update applies one UpdateType to one IU.
type Update struct {
	Type UpdateType
	IU   IU
}

// AddOf returns an ADD update for u.
func AddOf(u IU) Update { return Update{Type: Add, IU: u} }

// CommitOf returns a COMMIT update for u.
func CommitOf(u IU) Update { return Update{Type: Commit, IU: u} }

// RevokeOf returns a REVOKE update for u.
func RevokeOf(u IU) Update { return Update{Type: Revoke, IU: u} }

// UpdateOf returns an UPDATE that gives u the new payload p.
func UpdateOf(u IU, p Payload) Update {
	u.Payload = p
	return Update{Type: UpdatePayload, IU: u}
}

// Message is one batch of updates from one producer; a consumer sees the batch at once.
type Message struct {
	From    string
	Updates []Update

	endOfInput bool // the runtime's marker after a consumer's last producer finished
}
