// Package evalrun runs an evaluation: every scenario of a set through each pipeline, each
// replay on the virtual clock in a process of its own (libespeak-ng, the agent's voice,
// keeps state across syntheses in a process, so a fresh process is what makes a replay
// deterministic; and one process per replay lets a bounded number run at once), then
// scores each replay's folder with package eval and sums up per pipeline.
//
// A replay's process runs a Job: the agent command runs it with 'agent eval --job FILE',
// tests with their own binary (Options.Command). RunJob is the same in both.
package evalrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/parley-voice/parley/audio/room"
	"github.com/parley-voice/parley/eval"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/logging"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/pipeline"
	"github.com/parley-voice/parley/userdirs"
)

// Job is one replay of an evaluation.
type Job struct {
	Scenario string `json:"scenario"`
	Pipeline string `json:"pipeline"`
	// Config is the agent's configuration file; "" is the built-in defaults.
	Config string `json:"config"`
	OutDir string `json:"out_dir"`
	// Laptop replays on the simulated laptop (room.Laptop), the echo cancelled.
	Laptop bool `json:"laptop"`
}

// Result is what a job wrote beside its replay (ResultFile).
type Result struct {
	Job
	WallSecs float64 `json:"wall_s"`
	// MinWordFraction is the configuration's: how much of a word heard counts as heard.
	MinWordFraction float64 `json:"min_word_fraction"`
	Error           string  `json:"error,omitempty"`
}

// The files of a job's folder.
const (
	JobFile    = "job.json"
	ResultFile = "result.json"
	LogFile    = "replay.log"
)

// RunJob runs the job in the file jobPath in this process: a replay on the virtual
// clock into the job's folder, with the log there (warnings and errors), and writes
// ResultFile. It returns the replay's error, which the result holds too.
func RunJob(ctx context.Context, jobPath string) error {
	data, err := readSmall(jobPath)
	if err != nil {
		return err
	}
	var job Job
	if err := json.Unmarshal(data, &job); err != nil {
		return fmt.Errorf("%s: %w", jobPath, err)
	}
	began := time.Now()
	res := Result{Job: job}
	mwf, err := replay(ctx, job)
	res.WallSecs, res.MinWordFraction = time.Since(began).Seconds(), mwf
	if err != nil {
		res.Error = err.Error()
	}
	out, merr := json.MarshalIndent(res, "", "  ")
	if merr != nil {
		return merr
	}
	if werr := os.WriteFile(filepath.Join(job.OutDir, ResultFile), out, 0o644); werr != nil && err == nil {
		err = werr
	}
	return err
}

// replay runs job's replay and returns the configuration's min_word_fraction.
func replay(ctx context.Context, job Job) (float64, error) {
	cfg, err := loadConfig(job.Config)
	if err != nil {
		return 0, err
	}
	if !slices.Contains(pipeline.Pipelines, job.Pipeline) {
		return 0, fmt.Errorf("pipeline %q: want one of %s", job.Pipeline, strings.Join(pipeline.Pipelines, ", "))
	}
	cfg = pipeline.WithPipeline(cfg, job.Pipeline)
	mwf := cfg.Dialogue.MinWordFraction
	if err := os.MkdirAll(job.OutDir, 0o755); err != nil {
		return mwf, err
	}
	log, closeLog, err := logging.New(logging.Config{Level: "warn", File: filepath.Join(job.OutDir, LogFile), Quiet: true}, io.Discard)
	if err != nil {
		return mwf, err
	}
	defer closeLog()
	eng, err := pipeline.LoadEngines(cfg, log)
	if err != nil {
		return mwf, err
	}
	defer eng.Close()
	opts := pipeline.ReplayOptions{Input: job.Scenario, OutDir: job.OutDir, Record: true, Logger: log}
	if job.Laptop {
		echo := room.Laptop()
		opts.Echo = &echo
	}
	_, err = pipeline.Replay(ctx, cfg, eng, opts)
	return mwf, err
}

// loadConfig reads the agent's configuration as the agent does: the file over the
// defaults for the user's folders, or the defaults.
func loadConfig(path string) (pipeline.Config, error) {
	base := pipeline.Default(userdirs.FromEnv())
	if path == "" {
		return base, base.Validate()
	}
	return pipeline.Load(path, base)
}

// Options are an evaluation's.
type Options struct {
	// Scenarios are the scenario files (Scenarios expands folders and lists).
	Scenarios []string
	Pipelines []string
	// Config is the agent's configuration file ("" the built-in defaults).
	Config string
	Laptop bool
	// OutDir receives a folder per replay (pipeline/scenario) and eval.json.
	OutDir string
	// Parallel is how many replays run at once (at least 1).
	Parallel int
	// Command returns the command that runs the job in jobFile in a process of its own
	// (and RunJob there).
	Command func(ctx context.Context, jobFile string) *exec.Cmd
	// Done, when set, hears each replay as it is scored (from one goroutine at a time).
	Done func(done, total int, job Job, score eval.ScenarioScore, wall time.Duration)
}

// ReportFile is the evaluation's report in OutDir.
const ReportFile = "eval.json"

// Run runs the evaluation and writes OutDir/eval.json. A replay that fails is scored as
// failed (its error in the report), not the end of the run; Run fails only when it
// cannot go on (ctx cancelled, an unwritable folder, recordings that cannot be made).
func Run(ctx context.Context, opts Options) (*eval.Report, error) {
	if opts.Parallel < 1 {
		opts.Parallel = 1
	}
	if len(opts.Scenarios) == 0 || len(opts.Pipelines) == 0 {
		return nil, errors.New("eval: no scenarios or no pipelines")
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	began := time.Now()
	// Make the recordings once, before the replays share the cache.
	if err := makeRecordings(ctx, opts.Scenarios, opts.Parallel); err != nil {
		return nil, err
	}
	type task struct {
		job  Job
		name string
	}
	var tasks []task
	for _, p := range opts.Pipelines {
		for _, sc := range opts.Scenarios {
			name := strings.TrimSuffix(filepath.Base(sc), filepath.Ext(sc))
			tasks = append(tasks, task{name: name, job: Job{Scenario: sc, Pipeline: p, Config: opts.Config, Laptop: opts.Laptop,
				OutDir: filepath.Join(opts.OutDir, p, name)}})
		}
	}
	scores := map[string][]eval.ScenarioScore{}
	for _, p := range opts.Pipelines {
		scores[p] = make([]eval.ScenarioScore, len(opts.Scenarios))
	}
	work := make(chan int)
	var mu sync.Mutex
	done := 0
	var wg sync.WaitGroup
	for range opts.Parallel {
		wg.Go(func() {
			for i := range work {
				t := tasks[i]
				score, wall := runOne(ctx, opts, t.job, t.name)
				mu.Lock()
				scores[t.job.Pipeline][i%len(opts.Scenarios)] = score
				done++
				if opts.Done != nil {
					opts.Done(done, len(tasks), t.job, score, wall)
				}
				mu.Unlock()
			}
		})
	}
	// Interleave the pipelines so that a run cut short has some of each.
	for k := range len(opts.Scenarios) {
		for p := range opts.Pipelines {
			select {
			case work <- p*len(opts.Scenarios) + k:
			case <-ctx.Done():
			}
		}
	}
	close(work)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &eval.Report{Date: time.Now().UTC(), Set: opts.Scenarios, Config: opts.Config, Laptop: opts.Laptop, Pipelines: opts.Pipelines,
		WallSecs: time.Since(began).Seconds(), Scenarios: scores, Replays: opts.OutDir}
	return rep, writeReport(rep)
}

// writeReport sums up rep's scores and writes it into its replays' folder.
func writeReport(rep *eval.Report) error {
	rep.Summaries = map[string]eval.Summary{}
	for _, p := range rep.Pipelines {
		rep.Summaries[p] = eval.Summarize(rep.Scenarios[p])
	}
	rep.Targets = nil
	if s, ok := rep.Summaries[eval.TargetPipeline]; ok {
		rep.Targets = eval.Targets(s, rep.Laptop)
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(rep.Replays, ReportFile), append(data, '\n'), 0o644)
}

// Rescore scores again the replays of the evaluation in dir (its eval.json names them)
// and rewrites its eval.json: for a change to the scoring, without replaying.
func Rescore(dir string) (*eval.Report, error) {
	f, err := regularfile.Open(filepath.Join(dir, ReportFile))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rep eval.Report
	if err := json.NewDecoder(f).Decode(&rep); err != nil {
		return nil, fmt.Errorf("%s: %w", ReportFile, err)
	}
	rep.Replays = dir
	for _, p := range rep.Pipelines {
		for i, sc := range rep.Set {
			name := strings.TrimSuffix(filepath.Base(sc), filepath.Ext(sc))
			rep.Scenarios[p][i] = score(filepath.Join(dir, p, name), name, nil)
		}
	}
	return &rep, writeReport(&rep)
}

// runOne runs a job in its own process and scores its folder.
func runOne(ctx context.Context, opts Options, job Job, name string) (eval.ScenarioScore, time.Duration) {
	began := time.Now()
	fail := func(err error) (eval.ScenarioScore, time.Duration) {
		return eval.ScenarioScore{Scenario: name, Error: err.Error()}, time.Since(began)
	}
	if err := os.RemoveAll(job.OutDir); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(job.OutDir, 0o755); err != nil {
		return fail(err)
	}
	data, err := json.MarshalIndent(job, "", "  ")
	if err != nil {
		return fail(err)
	}
	jobFile := filepath.Join(job.OutDir, JobFile)
	if err := os.WriteFile(jobFile, data, 0o644); err != nil {
		return fail(err)
	}
	cmd := opts.Command(ctx, jobFile)
	out, err := cmd.CombinedOutput()
	if len(out) > 0 {
		_ = os.WriteFile(filepath.Join(job.OutDir, "output.txt"), out, 0o644)
	}
	if err != nil {
		err = fmt.Errorf("the replay's process: %w: %s", err, lastLine(out))
	}
	return score(job.OutDir, name, err), time.Since(began)
}

// score scores the replay in dir (its ResultFile and outputs); runErr is how its
// process failed, if it did.
func score(dir, name string, runErr error) eval.ScenarioScore {
	fail := func(err error) eval.ScenarioScore { return eval.ScenarioScore{Scenario: name, Error: err.Error()} }
	var res Result
	data, err := readSmall(filepath.Join(dir, ResultFile))
	if err == nil {
		err = json.Unmarshal(data, &res)
	}
	switch {
	case res.Error != "":
		return fail(errors.New(res.Error))
	case runErr != nil:
		return fail(runErr)
	case err != nil:
		return fail(fmt.Errorf("the replay's result: %w", err))
	}
	o, err := eval.Read(dir, res.MinWordFraction)
	if err != nil {
		return fail(fmt.Errorf("reading the replay: %w", err))
	}
	return eval.Score(name, o)
}

// makeRecordings makes the scenarios' recordings into the voice cache, par at a time.
func makeRecordings(ctx context.Context, scenarios []string, par int) error {
	errs := make([]error, len(scenarios))
	work := make(chan int)
	var wg sync.WaitGroup
	for range par {
		wg.Go(func() {
			for i := range work {
				sc, err := source.LoadScenario(scenarios[i])
				if err == nil {
					err = pipeline.MakeRecordings(ctx, sc)
				}
				errs[i] = err
			}
		})
	}
	for i := range scenarios {
		work <- i
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// Scenarios expands args into scenario files: a .yaml or .yml file is one, a folder
// holds them, and a .list file lists them one a line (relative to its folder; # starts
// a comment).
func Scenarios(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		st, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		switch {
		case st.IsDir():
			found, err := filepath.Glob(filepath.Join(a, "*.yaml"))
			if err != nil {
				return nil, err
			}
			if len(found) == 0 {
				return nil, fmt.Errorf("%s: no scenario files (*.yaml)", a)
			}
			out = append(out, found...)
		case strings.HasSuffix(a, ".list"):
			data, err := readSmall(a)
			if err != nil {
				return nil, err
			}
			sc := bufio.NewScanner(strings.NewReader(string(data)))
			for sc.Scan() {
				line := strings.TrimSpace(sc.Text())
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				if !filepath.IsAbs(line) {
					line = filepath.Join(filepath.Dir(a), line)
				}
				out = append(out, line)
			}
		default:
			out = append(out, a)
		}
	}
	return out, nil
}

func readSmall(path string) ([]byte, error) {
	f, err := regularfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
