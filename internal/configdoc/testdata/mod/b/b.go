package b

// Inner is a section whose Level matters.
type Inner struct {
	// Level is a level.
	Level int `yaml:"level"`
}
