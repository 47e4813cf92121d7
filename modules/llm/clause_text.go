package llm

// ClauseText lets the TTS read a clause without importing this package (tts.Clause).
func (c Clause) ClauseText() (turnID, clauseID int, text string, last bool) {
	return c.TurnID, c.ClauseID, c.Text, c.Last
}
