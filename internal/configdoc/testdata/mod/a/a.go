package a

import (
	"time"

	"example.com/m/b"
)

// Config is the root.
type Config struct {
	// Name is the name. It has a second sentence.
	Name string `yaml:"name"`
	// Low and High bound the range, e.g. 1 to 2. High stays above Low.
	Low  int `yaml:"low"`
	High int `yaml:"high"`
	// Wait is long. Retry says what Wait does not.
	Wait  time.Duration `yaml:"wait"`
	Retry bool          `yaml:"retry"`
	Every time.Duration `yaml:"every"` // Every is how often.
	Inner b.Inner       `yaml:"inner"`
	Flat  Flat          `yaml:",inline"`
	// Hidden is not a key.
	Hidden     string `yaml:"-"`
	unexported int
}

// Flat holds keys that are written inline.
type Flat struct {
	// Extra is one of them.
	Extra bool `yaml:"extra"`
}

// Bad has a key without a comment.
type Bad struct {
	// Fine is documented.
	Fine  int `yaml:"fine"`
	Plain int `yaml:"plain"`
}
