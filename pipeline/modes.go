package pipeline

import (
	"time"

	"github.com/parley-voice/parley/engines/whisper"
	"github.com/parley-voice/parley/modules/asr"
	"github.com/parley-voice/parley/modules/vad"
	"github.com/parley-voice/parley/turntaking"
)

// settings is a configuration run as its pipeline: the configuration with what the
// pipeline changes in it (what WithPipeline returns, and a loaded configuration shows),
// and the settings Build derives from it for the modules. The second part stays out of
// the configuration so that a configuration read for one pipeline can be run as another
// (agent replay --pipeline, agent bench).
type settings struct {
	Config
	// asr is the recogniser's configuration.
	asr asr.Config
	// prefill: the LLM reads the user's words as they come (llm.Config.Prefill), which
	// the recogniser sends it, and estimates whether the turn is complete.
	prefill bool
	// predictTurnEnd: the user's turn ends by the end_of_turn policy (with its waits);
	// otherwise by the VAD's end_of_turn of silence, as the VAD hears it.
	predictTurnEnd bool
}

// pipelineSettings returns cfg run as cfg.Pipeline. Everything a pipeline means is in
// its function below; an unknown pipeline (which Validate reports) changes nothing.
func pipelineSettings(cfg Config) settings {
	s := settings{Config: cfg, asr: cfg.ASR}
	switch cfg.Pipeline {
	case Predictive:
		predictivePipeline(&s)
	case Incremental:
		incrementalPipeline(&s)
	case TurnBased:
		turnBasedPipeline(&s)
	}
	return s
}

// predictivePipeline: the LLM reads the user's words while they speak, a reply is
// prepared during their pauses, and the end of the turn is predicted (package turnend).
func predictivePipeline(s *settings) {
	s.prefill = true
	s.predictTurnEnd = true
	if s.EndOfTurn.UsesHolds() {
		// The policy's holds count from the segment's padded end, which the VAD
		// reports once MergeGap of silence followed the speech, at the end of the
		// window that completes it; no turn ends before. So the merge gap is the short
		// hold plus the pad, to the nearest window: the short hold of 160 ms and the
		// pad end 190 ms after the speech, and the sixth window ends at 192. A longer
		// gap would stretch the short hold; a shorter one would end the segment before
		// the hold, and a voice that resumed in between would reach the policy only
		// after the turn had ended on the silence before it.
		s.VAD.MergeGap = min(s.VAD.MergeGap, vad.NearestWindows(s.EndOfTurn.Holds.Short+s.VAD.SpeechPad, whisper.VADWindow))
	}
	// The reply is prepared for the recogniser's words at the user's pause: all of
	// them, the last ones not yet confirmed by local agreement too, and the final
	// decode's words as soon as it is done. That decode starts once its trailing audio
	// is in after the VAD's pause, not only at the segment's end (the merge gap):
	// pocketsphinx's own finals (once it adapted) after a tentative pause already, with
	// the silence MinSilence covers after the padded end (their word error rate is the
	// same with 0, 30, 70, 170 or 300 ms: agent wer -mode stream -trailing; less than
	// 70 ms flips the demo's "lamp" to "lamb"), the final pass at the sure pause with
	// finalPassTrailing (shorter ones flip "what time is it" to "what time as").
	s.asr.EarlyFinal = true
	s.asr.EmitUnstable = true
	s.asr.SpeculateAtPause = true
	// The recogniser counts both from where the VAD's probability fell, also when the end
	// is dated by the level (vad.end_trim, vad.Segment.Trimmed).
	s.asr.Trailing = min(s.asr.Trailing, finalPassTrailing)
	s.asr.PeekTrailing = min(s.asr.Trailing, max(s.VAD.MinSilence-s.VAD.SpeechPad, 0))
}

// finalPassTrailing is the silence after the speech's padded end that pocketsphinx's
// final pass decodes with it.
const finalPassTrailing = 170 * time.Millisecond

// incrementalPipeline: incremental recognition and speech, but the LLM starts at the
// end of the user's turn, which a fixed silence decides.
func incrementalPipeline(s *settings) {
	s.TurnTaking.Prepare.After = 0
}

// turnBasedPipeline: no partial recognition, and the whole reply is generated before
// the agent speaks; the classic barge-in.
func turnBasedPipeline(s *settings) {
	s.TurnTaking.Prepare.After = 0
	s.LLM.StreamClauses = false
	s.ASR.Hop = 24 * time.Hour // no partial hypotheses: one decode at the end of the turn
	s.ASR.Speculative = false  // and not before it
	s.asr = s.ASR
	s.TurnTaking.BargeIn.MinWords = 0
	// The classic barge-in: the agent pauses at the user's first sound and stops after
	// the minimum duration, whatever the sound was.
	s.TurnTaking.BargeIn.Hold = turntaking.HoldPause
	s.Overlap.Enabled = false
}

// WithPipeline returns cfg changed to run pipeline name (see Predictive, Incremental and
// TurnBased); the baselines turn off what they do not have.
func WithPipeline(cfg Config, name string) Config {
	cfg.Pipeline = name
	return pipelineSettings(cfg).Config
}
