package pipetest

import (
	"sync"
	"time"

	"github.com/parley-voice/parley/iu"
)

// Senders records the modules that sent IUs (make it with Names set).
type Senders struct {
	mu    sync.Mutex
	Names map[string]bool
}

// Observe implements iu.Observer.
func (s *Senders) Observe(_ time.Time, m iu.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Names[m.From] = true
}
