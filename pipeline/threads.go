package pipeline

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// ThreadPlan is how the engines share the machine's cores: the LLM's threads for
// generating (one token at a time, bound by memory bandwidth: a second thread adds
// little on 2 cores) and for reading prompts (bound by compute), and whisper's threads.
// Generation and whisper's partials run for long stretches beside the audio path (VAD,
// TTS, echo canceller, devices), so each takes half of the cores by default and the
// audio path is never left without one; prompts, short bursts bound by compute, take all
// (batches of a few tokens excepted: bound by memory as a single token is, they keep the
// generation's threads; llama.DefaultBatchThreadsFrom).
type ThreadPlan struct {
	// Cores is the budget divided: the config's `cores`, or the logical CPUs.
	Cores int `json:"cores"`
	// LLM and LLMBatch are llama.cpp's threads for generation and for prompts.
	LLM      int `json:"llm_threads"`
	LLMBatch int `json:"llm_batch_threads"`
	// Whisper is whisper.cpp's decoding threads (used when the ASR engine is whisper),
	// WhisperFinal its threads for the decodes the user waits on.
	Whisper      int `json:"whisper_threads"`
	WhisperFinal int `json:"whisper_final_threads"`
	// VAD is the Silero VAD's threads (vad.threads, at most the cores).
	VAD int `json:"vad_threads,omitempty"`
	// OpenMPWait is the OpenMP wait policy of the process (OMP_WAIT_POLICY; 'agent'
	// re-runs itself with passive when none is set: spinning idle threads would take the
	// cores the plan gives the others).
	OpenMPWait string `json:"openmp_wait_policy"`
	// Capped says which configured thread counts were more than the machine's cores,
	// and what they were capped to (LoadEngines logs it).
	Capped []string `json:"capped,omitempty"`
}

// CapThreads limits a thread count (cores, a setting's threads) to the machine's logical
// CPUs: more threads than cores only slow the engines (and a very large number makes
// libgomp fail). note says what was capped, for a log line; it is "" when n fits.
func CapThreads(key string, n int) (capped int, note string) {
	cpus := runtime.NumCPU()
	if n <= cpus {
		return n, ""
	}
	return cpus, fmt.Sprintf("%s %d is more than the machine's %d logical CPUs: using %d", key, n, cpus, cpus)
}

// Threads returns the thread plan of c: each engine's configured threads, or half the
// cores (all of them for prompts), none more than the machine's logical CPUs.
func (c Config) Threads() ThreadPlan {
	p := ThreadPlan{OpenMPWait: os.Getenv("OMP_WAIT_POLICY")}
	capped := func(key string, n int) int {
		n, note := CapThreads(key, n)
		if note != "" {
			p.Capped = append(p.Capped, note)
		}
		return n
	}
	cores := capped("cores", c.Cores)
	if cores <= 0 {
		cores = runtime.NumCPU()
	}
	half := max(1, cores/2)
	p.Cores = cores
	p.LLM = capped("llm.threads", c.LLM.Threads)
	p.LLMBatch = capped("llm.threads_batch", c.LLM.ThreadsBatch)
	p.Whisper = capped("asr.whisper.threads", c.ASR.Whisper.Threads)
	p.WhisperFinal = capped("asr.whisper.final_threads", c.ASR.Whisper.FinalThreads)
	p.VAD = capped("vad.threads", c.VAD.Threads)
	if p.LLM <= 0 {
		p.LLM = half
	}
	if p.LLMBatch <= 0 {
		// Prompts of llama.DefaultBatchThreadsFrom tokens or more (a turn's history, a
		// reply prepared again) are bound by compute: they take every core while they last.
		p.LLMBatch = cores
	}
	if p.Whisper <= 0 {
		p.Whisper = half
	}
	if p.WhisperFinal <= 0 {
		// Every core for the decodes the user waits on measured no faster on 2 cores,
		// and cost CPU (docs/PERFORMANCE.md, whisper): the LLM's prepared reply and
		// the audio path still run beside them.
		p.WhisperFinal = p.Whisper
	}
	if p.OpenMPWait == "" {
		p.OpenMPWait = "default (spinning)"
	}
	return p
}

// String is the plan on one line ('agent doctor', logs).
func (p ThreadPlan) String() string {
	s := fmt.Sprintf("%d cores: llm %d threads (prompts %d), whisper %d (at the end of the turn %d); OpenMP wait policy %s", p.Cores, p.LLM, p.LLMBatch, p.Whisper, p.WhisperFinal, p.OpenMPWait)
	if len(p.Capped) > 0 {
		s += " (" + strings.Join(p.Capped, "; ") + ")"
	}
	return s
}
