package pipetest

import "github.com/parley-voice/parley/dialogue"

// ScenarioTurns returns the project's scenario set with the user turns each one holds:
// what a listener would count, with a pause inside a sentence not ending it.
func ScenarioTurns() map[string]int {
	return map[string]int{
		"demo.yaml":                3,
		"bench.yaml":               4,
		"pause-mid-sentence.yaml":  1,
		"list-pause.yaml":          1,
		"trailing-and.yaml":        1,
		"hesitation.yaml":          1,
		"two-questions.yaml":       2,
		"pause-after-can-you.yaml": 1,
	}
}

// UserTurns returns the user's utterances in a history.
func UserTurns(h *dialogue.History) []string {
	var out []string
	for _, u := range h.Utterances() {
		if u.Speaker == dialogue.User {
			out = append(out, u.Text)
		}
	}
	return out
}
