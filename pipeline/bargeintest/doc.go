// Package bargeintest replays the barge-ins of the sounds table
// (pipeline/internal/overlaptable) over the agent's answer through the whole pipeline;
// overlaptest replays its backchannels and noises, hesitanttest barge-ins in phrases.
package bargeintest
