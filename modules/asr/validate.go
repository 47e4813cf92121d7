package asr

import (
	"errors"
	"fmt"
	"time"
)

// maxHMMsPerFrame bounds PocketsphinxConfig.MaxHMMsPerFrame: far more than any frame
// holds (pocketsphinx's own default is 30000), and within pocketsphinx's int.
const maxHMMsPerFrame = 1_000_000

// Validate reports the first setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Hop < 0:
		return fmt.Errorf("asr: hop %v must not be negative", c.Hop)
	case c.Agreement < 1:
		return fmt.Errorf("asr: agreement %d must be at least 1", c.Agreement)
	case c.PreRoll < 0 || c.Trailing < 0 || c.PeekTrailing < 0:
		return errors.New("asr: pre_roll and trailing must not be negative")
	case c.Pocketsphinx.MaxHMMsPerFrame < 0 || c.Pocketsphinx.MaxHMMsPerFrame > maxHMMsPerFrame:
		return fmt.Errorf("asr: pocketsphinx max_hmms_per_frame %d is not in 0–%d (0: pocketsphinx's own)", c.Pocketsphinx.MaxHMMsPerFrame, maxHMMsPerFrame)
	case c.Pocketsphinx.AdaptAfter < 0:
		return fmt.Errorf("asr: pocketsphinx adapt_after %v must not be negative", c.Pocketsphinx.AdaptAfter)
	case c.History < c.PreRoll+time.Second:
		return fmt.Errorf("asr: history %v must exceed pre_roll by at least the VAD's onset delay (1 s)", c.History)
	case c.Whisper.Threads < 0:
		return fmt.Errorf("asr: whisper threads %d must not be negative (0: the thread plan's)", c.Whisper.Threads)
	case c.Whisper.BeamSize < 0 || c.Whisper.BeamSize > MaxBeamSize:
		return fmt.Errorf("asr: whisper beam_size %d is not in 0–%d (below 2: greedy)", c.Whisper.BeamSize, MaxBeamSize)
	case c.Pocketsphinx.SampleRate != 0 && (c.Pocketsphinx.SampleRate < 8000 || c.Pocketsphinx.SampleRate > 48000):
		return fmt.Errorf("asr: pocketsphinx sample_rate %d Hz is not in 8000–48000 (0: 16000)", c.Pocketsphinx.SampleRate)
	}
	return nil
}
