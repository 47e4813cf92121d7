package pipeline

// LogNames lists the logger names the agent's parts write under: the network's modules
// and the history and latency observers beside them. A module's own children ("asr.x")
// are covered by its name. Users set levels per name (agent --log-modules), so every
// module Build adds must be here; TestLogNamesCoverTheNetwork checks it.
func LogNames() []string {
	return []string{
		NameInput, NameEcho, NameAEC, NameVAD, NameASR, NameOverlap, NameTurnEnd, NameManager, NameLLM, NameHold, NameTTS, NameSpeaker, NameConsole,
		nameUserAudio, nameMicAudio, nameAECAudio, nameAECLinearAudio, nameHistory, nameMetrics,
	}
}

// Names of the loggers beside the modules of NameInput and the others.
const (
	nameUserAudio = "user-audio" // the replay's recorder of the user's audio
	nameMicAudio  = "mic-audio"  // of what the simulated laptop's microphone picked up
	nameAECAudio  = "aec-audio"  // of what the echo canceller left of it
	// nameAECLinearAudio is the recorder of the canceller's linear output.
	nameAECLinearAudio = "aec-linear-audio"
	nameHistory        = "history"
	nameMetrics        = "metrics"
)
