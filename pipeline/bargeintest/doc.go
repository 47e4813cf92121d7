// Package bargeintest replays the barge-ins of the sounds table
// (pipeline/internal/overlaptable) and hesitant barge-ins over the agent's answer through
// the whole pipeline; overlaptest replays the table's backchannels and noises.
package bargeintest
