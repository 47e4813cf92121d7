// Package overlaptable is the table of sounds over the agent: backchannels, noises and
// barge-ins in voices no other test uses, each placed in the agent's answer, replayed
// through the whole pipeline on the virtual clock and measured on the speaker's rendered
// output against the targets of soft barge-in handling. The test packages overlaptest
// (backchannels and noises), bargeintest (barge-ins) and hesitanttest (barge-ins in
// phrases) run its parts in processes of their own, so that each stays within go test's
// default timeout.
package overlaptable
