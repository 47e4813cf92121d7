// Package overlaptest replays sounds over the agent's answer (backchannels, noises,
// barge-ins, hesitant barge-ins) through the whole pipeline and checks the targets of
// soft barge-in handling.
package overlaptest
