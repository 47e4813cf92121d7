package iu

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidUpdate is wrapped by every error about an update that breaks the IU rules.
var ErrInvalidUpdate = errors.New("invalid IU update")

// output issues a module's IUs and checks its updates. It is used only by the module's
// goroutine (and its tracked workers, which the module must not run concurrently with
// its own sends).
type output struct {
	creator string
	seq     uint64
	last    ID // the newest IU still in the chain, for Previous
	// open holds the IUs that were issued or added and are not final yet; finished IUs
	// are forgotten, so the map stays as small as the number of open IUs.
	open map[ID]*openIU
}

type openIU struct {
	added    bool
	previous ID
}

func newOutput(creator string) *output {
	return &output{creator: creator, open: make(map[ID]*openIU)}
}

func (o *output) newIU(now time.Time, p Payload, groundedIn []ID) IU {
	o.seq++
	id := makeID(o.creator, o.seq)
	u := IU{ID: id, Creator: o.creator, Previous: o.last, GroundedIn: groundedIn, Payload: p, Created: now}
	o.open[id] = &openIU{previous: o.last}
	o.last = id
	return u
}

// apply checks a batch against the rules and records its effect, all or nothing. It
// returns the updates with each IU's State set to its state after the update.
func (o *output) apply(updates []Update) ([]Update, error) {
	// Check against a scratch view first, so a bad batch changes nothing.
	pending := make(map[ID]State, len(updates))
	added := make(map[ID]bool, len(updates))
	for i, up := range updates {
		id := up.IU.ID
		st, known := pending[id]
		rec := o.open[id]
		if !known {
			if rec == nil {
				return nil, o.unknown(i, up)
			}
			st = Open
		}
		isAdded := added[id] || (rec != nil && rec.added)
		switch up.Type {
		case Add:
			if isAdded {
				return nil, fmt.Errorf("%w: update %d: %s added twice", ErrInvalidUpdate, i, id)
			}
			added[id] = true
		case UpdatePayload, Commit, Revoke:
			if !isAdded {
				return nil, fmt.Errorf("%w: update %d: %s %s before it was added", ErrInvalidUpdate, i, up.Type, id)
			}
			if st != Open {
				return nil, fmt.Errorf("%w: update %d: %s %s after it was %s", ErrInvalidUpdate, i, up.Type, id, st)
			}
			switch up.Type {
			case Commit:
				st = Committed
			case Revoke:
				st = Revoked
			}
		default:
			return nil, fmt.Errorf("%w: update %d: unknown type %d", ErrInvalidUpdate, i, up.Type)
		}
		if up.IU.Payload == nil {
			return nil, fmt.Errorf("%w: update %d: %s has no payload", ErrInvalidUpdate, i, id)
		}
		pending[id] = st
	}
	out := make([]Update, len(updates))
	// rewound maps the IUs this batch revoked to the IU before each that survives it: an
	// IU created before the batch, to follow words it revokes, follows that one instead.
	var rewound map[ID]ID
	for i, up := range updates {
		id := up.IU.ID
		rec := o.open[id]
		for prev, ok := rewound[rec.previous]; ok; prev, ok = rewound[rec.previous] {
			rec.previous = prev
		}
		up.IU.Previous = rec.previous
		switch up.Type {
		case Add:
			rec.added = true
			up.IU.State = Open
		case UpdatePayload:
			up.IU.State = Open
		case Commit:
			up.IU.State = Committed
		case Revoke:
			up.IU.State = Revoked
		}
		if up.Type == Commit || up.Type == Revoke {
			if up.Type == Revoke {
				if o.last == id {
					// The chain continues from the IU before the revoked one.
					o.last = rec.previous
				}
				if rewound == nil {
					rewound = make(map[ID]ID)
				}
				rewound[id] = rec.previous
			}
			delete(o.open, id)
		}
		out[i] = up
	}
	return out, nil
}

func (o *output) unknown(i int, up Update) error {
	id := up.IU.ID
	if id.Creator() != o.creator {
		return fmt.Errorf("%w: update %d: %s %s was not created by %s", ErrInvalidUpdate, i, up.Type, id, o.creator)
	}
	if s := id.Seq(); s > 0 && s <= o.seq {
		return fmt.Errorf("%w: update %d: %s %s after it was committed or revoked", ErrInvalidUpdate, i, up.Type, id)
	}
	return fmt.Errorf("%w: update %d: %s %s was never issued", ErrInvalidUpdate, i, up.Type, id)
}
