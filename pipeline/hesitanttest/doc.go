// Package hesitanttest replays barge-ins in phrases, with pauses between them, over the
// agent's answer through the whole pipeline (pipeline/internal/overlaptable), in a
// process of its own beside the sounds table's halves (overlaptest, bargeintest).
package hesitanttest
