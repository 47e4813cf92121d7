package turntaking

// State is the conversation state: who is speaking.
type State uint8

// Conversation states.
const (
	Idle              State = iota // nobody has spoken yet, or the agent is waiting for input
	UserSpeaking                   // the user speaks and the agent is silent
	SilenceAfterUser               // the user stopped; the agent is deciding or preparing a reply
	AgentSpeaking                  // the listener hears the agent
	SilenceAfterAgent              // the agent finished its turn
	Overlap                        // the user speaks while the agent's turn is under way
)

var stateNames = [...]string{"idle", "user speaking", "silence after user", "agent speaking", "silence after agent", "overlap"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state?"
}
