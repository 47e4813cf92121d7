package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/parley-voice/parley/eval"
	"github.com/parley-voice/parley/eval/evalrun"
	"github.com/parley-voice/parley/pipeline"
)

func evalCommand() command {
	return command{
		Name:     "eval",
		Summary:  "replay a scenario set (configs/eval) through each pipeline and score turn-taking from the output alone: Full-Duplex-Bench's takeover rates and gaps, interruptions' duck and silence, self-interruptions, history; writes eval.json",
		Run:      runEval,
		LogLevel: "warn",
	}
}

// evalSet is the scenario set agent eval runs by default.
const evalSet = "configs/eval"

func runEval(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "eval", "[SCENARIO.yaml|FOLDER|LIST.list ...]  (default: "+evalSet+", the whole set)")
	cfgPath := configFlag(fs)
	out := fs.String("o", "", "output folder for eval.json and the replays (default: evals/eval-TIME in the logs folder)")
	only := fs.String("pipeline", "all", "predictive, incremental, turn-based or all")
	laptop := fs.Bool("laptop", false, "replay on a simulated laptop whose speakers reach its microphone (30 ms, −6 dB, RT60 300 ms), the echo cancelled as audio.echo_cancel says (auto: on)")
	par := fs.Int("j", min(runtime.NumCPU(), 2), "replays at once (each in a process of its own)")
	rescore := fs.String("score", "", "score again the replays of the evaluation in this folder (after a change to the scoring) and rewrite its eval.json")
	job := fs.String("job", "", "internal: run the one replay an evaluation's job file describes")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *job != "" {
		return evalrun.RunJob(ctx, *job)
	}
	if *rescore != "" {
		rep, err := evalrun.Rescore(*rescore)
		if err != nil {
			return err
		}
		eval.WriteTable(a.stdout, rep.Pipelines, rep.Summaries, rep.Laptop)
		fmt.Fprintf(a.stdout, "\nwrote %s\n", filepath.Join(*rescore, evalrun.ReportFile))
		return nil
	}
	if *par < 1 || *par > 64 {
		return usageErrorf("-j must lie between 1 and 64")
	}
	pipelines := pipeline.Pipelines
	if *only != "all" {
		if !slices.Contains(pipeline.Pipelines, *only) {
			return usageErrorf("--pipeline %q: want predictive, incremental, turn-based or all", *only)
		}
		pipelines = []string{*only}
	}
	if len(rest) == 0 {
		if _, err := os.Stat(evalSet); err != nil {
			return fmt.Errorf("the scenario set %s is not here: run agent eval in a checkout of Parley, or name the scenarios", evalSet)
		}
		rest = []string{evalSet}
	}
	scenarios, err := evalrun.Scenarios(rest)
	if err != nil {
		return err
	}
	// The configuration as the replays will read it: the named file, else the user's,
	// else the built-in defaults ("").
	_, from, err := loadAgentConfig(a, *cfgPath)
	if err != nil {
		return err
	}
	config := ""
	if from != "built-in defaults" {
		if config, err = filepath.Abs(from); err != nil {
			return err
		}
	}
	dir := *out
	if dir == "" {
		dir = filepath.Join(a.paths.Logs, "evals", "eval-"+time.Now().Format("20060102-150405"))
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for i, s := range scenarios {
		if scenarios[i], err = filepath.Abs(s); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stdout, "%d scenarios × %d pipelines (%s)%s, %d at a time, into %s\n", len(scenarios), len(pipelines),
		strings.Join(pipelines, ", "), map[bool]string{true: " on the simulated laptop"}[*laptop], *par, dir)
	rep, err := evalrun.Run(ctx, evalrun.Options{
		Scenarios: scenarios, Pipelines: pipelines, Config: config, Laptop: *laptop, OutDir: dir, Parallel: *par,
		Command: func(ctx context.Context, jobFile string) *exec.Cmd {
			return exec.CommandContext(ctx, self, "eval", "--job", jobFile)
		},
		Done: func(done, total int, job evalrun.Job, s eval.ScenarioScore, wall time.Duration) {
			status := "ok"
			if s.Error != "" {
				status = "FAILED: " + s.Error
			}
			fmt.Fprintf(a.stdout, "[%3d/%d] %-11s %-24s %5.1fs  %s\n", done, total, job.Pipeline, s.Scenario, wall.Seconds(), status)
		},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nscored %d replays in %v (wall clock)\n\n", len(scenarios)*len(pipelines), time.Duration(rep.WallSecs*float64(time.Second)).Round(time.Second))
	eval.WriteTable(a.stdout, pipelines, rep.Summaries, *laptop)
	fmt.Fprintf(a.stdout, "\nwrote %s (every scenario's scores) and a folder per replay beside it\n", filepath.Join(dir, evalrun.ReportFile))
	return nil
}
