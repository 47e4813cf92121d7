// Package overlaptest replays the backchannels and noises of the sounds table
// (pipeline/internal/overlaptable) over the agent's answer through the whole pipeline;
// bargeintest replays its barge-ins.
package overlaptest
