// Package turntaking is the dialogue's turn-taking policy, pure and clock-free: it
// follows user speech (the VAD's candidates, segments and pauses, the recogniser's words
// and utterances, the overlap module's evidence about sounds over the agent), the
// agent's reply (the LLM's reply, the TTS's audio) and what the listener hears of it
// (the speaker's reports), and decides when the agent answers, prepares an answer,
// ducks, pauses, resumes or is interrupted, and what the history keeps.
//
// Events go in (Policy.Handle, and Policy.Tick at Policy.Deadline); actions come out:
// control commands for the modules that make the agent's speech, history records (a
// user turn, a backchannel, the close of an agent turn with what was heard of it), the
// agent turn's progress as the listener hears it, and changes of state. Its decisions
// are tested from timelines of events.
//
// The parts, each owning its own state:
//
//   - lexicon: the backchannels and interrupt words, and the rules that read decodes
//     and transcripts by them (a value).
//   - bargeIn: a sound of the user's over the agent under evaluation, with its own
//     deadline; it decides (interrupt, hold, release, resume, settle) and the policy
//     carries the decision out.
//   - agentTurn: the one record of the agent turn under way: reply, audio, position
//     heard, and how it closes.
//   - preparer and turnIDs: replies prepared ahead while the user pauses, and the turn
//     ids they take (and give back when withdrawn).
//   - backchannels: what sounds that did not interrupt were, pieces of speech cut up by
//     an echo canceller, and the backchannels waiting for their agent turn to close.
//   - Policy: composes them and keeps who has the floor (State).
//
// It imports neither the IU runtime nor any module: modules/manager adapts IUs to its
// events and its actions to IUs and history operations.
package turntaking
