package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parley-voice/parley/dialogue"
	"github.com/parley-voice/parley/internal/testenv"
)

// TestLiveMemorySoak is a benchmark, not part of the suite: with PARLEY_LIVE_SOAK set to
// a duration (20m for the figure in the docs), it runs 'agent live' that long through a
// private PulseAudio server while a user asks a question every 45 s, samples the
// process's resident memory every 10 s, and wants the second half of the session to add
// less than 20 MiB: a session of hours holds about what one of minutes does.
//
//	PARLEY_LIVE_SOAK=20m scripts/env go test -count=1 -timeout 40m -run TestLiveMemorySoak -v ./cmd/agent/
func TestLiveMemorySoak(t *testing.T) {
	setting := os.Getenv("PARLEY_LIVE_SOAK")
	if setting == "" {
		t.Skip("a soak benchmark: set PARLEY_LIVE_SOAK to a duration (e.g. 20m) to run it")
	}
	length, err := time.ParseDuration(setting)
	if err != nil || length < 2*time.Minute || length > 24*time.Hour {
		t.Fatalf("PARLEY_LIVE_SOAK=%q: want a duration between 2m and 24h", setting)
	}
	const (
		sampleEvery = 10 * time.Second
		askEvery    = 45 * time.Second
		maxGrowth   = 20 << 20
	)
	f := newLiveFixture(t)
	questions := []string{
		testenv.SharedFile(t, "audio/v2j_what_time_is_it.wav"),
		testenv.SharedFile(t, "audio/v2j_turn_on_living_room_lamp.wav"),
		testenv.SharedFile(t, "audio/v2j_hey_mycroft.wav"),
		testenv.SharedFile(t, "audio/v2j_launch_firefox.wav"),
	}
	p := startAgent(t, f.env, nil, "live", "--config", f.demo, "--log-modules", "input=info,aec=info",
		"--session", "soak", "--duration", length.String())
	p.waitLine(t, "microphone open", time.Minute)
	began := time.Now()

	type sample struct {
		at       time.Duration
		rss, hwm int64
	}
	var samples []sample
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	asked := make(chan int, 1)
	go func() { // the user: a question every askEvery, until the session ends
		n := 0
		defer func() { asked <- n }()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(askEvery):
			}
			if err := f.srv.Play(ctx, f.room.Name, questions[i%len(questions)]); err != nil {
				return
			}
			n++
		}
	}()
	status := fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
sampling:
	for {
		select {
		case <-p.done:
			break sampling
		case <-tick.C:
			data, err := os.ReadFile(status)
			if err != nil {
				break sampling // the process is ending
			}
			s := sample{at: time.Since(began), rss: statusField(data, "VmRSS"), hwm: statusField(data, "VmHWM")}
			if s.rss > 0 && s.at < length {
				samples = append(samples, s)
			}
		}
	}
	stop()
	questionsAsked := <-asked
	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("live exited %d; stderr:\n%s", code, p.stderrText())
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%8s %9s %9s\n", "time", "RSS MiB", "peak MiB")
	for i, s := range samples {
		if i%6 == 0 || i == len(samples)-1 {
			fmt.Fprintf(&table, "%8v %9.1f %9.1f\n", s.at.Round(time.Second), float64(s.rss)/(1<<20), float64(s.hwm)/(1<<20))
		}
	}
	t.Logf("resident memory of 'agent live' over %v (%d questions asked):\n%s", length, questionsAsked, table.String())
	sess, err := dialogue.LoadSession(f.sessionDir("soak"))
	if err != nil {
		t.Fatal(err)
	}
	users, agents := 0, 0
	for _, u := range sess.History.Utterances() {
		switch u.Speaker {
		case dialogue.User:
			users++
		case dialogue.Agent:
			agents++
		}
	}
	t.Logf("the session holds %d user and %d agent turns", users, agents)
	if users < questionsAsked/2 || agents < questionsAsked/2 {
		t.Errorf("the agent heard %d and answered %d of %d questions: it was not working through the session", users, agents, questionsAsked)
	}
	if len(samples) < int(length/sampleEvery)*3/4 {
		t.Fatalf("%d samples of memory in %v, want about %d", len(samples), length, length/sampleEvery)
	}
	var mid sample
	for _, s := range samples {
		if s.at >= length/2 {
			mid = s
			break
		}
	}
	last := samples[len(samples)-1]
	growth := last.rss - mid.rss
	t.Logf("the second half (%v to %v) grew resident memory by %.1f MiB (%.1f to %.1f); peak %.1f MiB",
		mid.at.Round(time.Second), last.at.Round(time.Second), float64(growth)/(1<<20), float64(mid.rss)/(1<<20), float64(last.rss)/(1<<20), float64(last.hwm)/(1<<20))
	if growth >= maxGrowth {
		t.Errorf("resident memory grew by %.1f MiB in the second half of the session, want less than %d MiB", float64(growth)/(1<<20), maxGrowth>>20)
	}
}
