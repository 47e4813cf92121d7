// Package dialogue holds the dialogue history and the conversation memory that the LLM
// module (which builds prompts from them) and the dialogue manager (which records turns
// and cuts interrupted ones) share.
//
// The pieces:
//
//   - Format: a chat template read from JSON (configs/prompts/<name>.json, loadable by
//     name or path), with its exact layout rules documented on the type.
//   - History: the utterances, the system prompt and the format; prompts for any range of
//     turns, context fitting with the model's tokenizer, and cutting an interrupted agent
//     turn back to what the user heard (Align). A plain value, owned by one goroutine.
//   - Memory: what of the history a reply prompt shows (everything, a window of
//     exchanges, a running summary, or recent turns plus a summary of older ones).
//   - Store: one goroutine that owns a History and a Memory, runs summaries in the
//     background, saves sessions, and serves the LLM module (BuildPrompt) and the dialogue
//     manager (AppendUtterance, CutInterrupted) through channels.
//   - Session: crash-safe saving and loading of a conversation, with an optional opaque
//     llama.cpp KV-state file.
//   - Transforms: input transforms for user text, stream transforms for the model's output
//     (Push/Flush), and Transcript for history to text and back.
//
// The self-ask protocol lives in the protocol subpackage.
//
// Conventions: turn ids come from the dialogue manager and never decrease along the
// history; a user utterance and the agent's reply to it may share a turn id, and the
// prompt for agent turn T shows every utterance before T plus the user's utterances of
// T. Character offsets are byte offsets into UTF-8 text, on rune boundaries.
//
// A turn the agent did not answer — its reply failed before any text (the LLM server
// died), or the user heard none of it — leaves the user's utterance in the history,
// with no agent utterance after it: the history keeps what was said. Prompts join
// consecutive user utterances into one user turn, their texts separated by a space, so
// that the next prompt never has two user turns in a row (which chat templates do not
// expect and models answer badly) and reads as the conversation went: the user's
// unanswered line, then what they said next, answered together. A reply that failed
// after some text is stored as far as it went, as an interrupted agent turn.
package dialogue
