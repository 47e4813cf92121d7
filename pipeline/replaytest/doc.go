// Package replaytest tests the assembled pipeline end to end on replays: turns and
// replies, barge-ins cut to the words heard, backchannels, the pinned demo, the
// predictive scenario set, prepared replies, llama-server as the LLM, the network's
// loggers, and replays that share the agent's voicing.
package replaytest
