package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/audio/voices"
	"github.com/parley-voice/parley/modules/source"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/tts/espeakng"
)

// The voice that speaks a scenario's absent recordings: an espeak-ng voice other than
// the agent's (en-us), so that the two sides sound apart in heard.wav, and slower than
// espeak-ng's normal rate, which pocketsphinx follows less well.
const (
	saidVoice = "en-us+m1"
	saidRate  = 120
)

// SaidVoice names the voice SpeakAbsent speaks with, for messages.
const SaidVoice = "espeak-ng " + saidVoice

// MakeRecordings makes sc's recordings that are made rather than recorded (a voice that
// says their words, or a synthesised sound: source.Recording.Made) and have no file
// here, in the voice cache (audio/voices, voices.DefaultCacheDir), and points the
// recordings at the cached files. A part of a sentence is cut out of the sentence the
// voice speaks whole (voices.Cache.SayWords, which aligns it with pocketsphinx). The
// voices are the engines' programs, not libespeak-ng, so it may run beside an agent.
func MakeRecordings(ctx context.Context, sc *source.Scenario) error {
	var cache *voices.Cache
	for i := range sc.Recordings {
		rec := &sc.Recordings[i]
		if rec.File != "" || !rec.Made() {
			continue
		}
		if cache == nil {
			var err error
			if cache, err = voices.OpenCache(voices.DefaultCacheDir()); err != nil {
				return err
			}
		}
		var err error
		switch {
		case rec.Part != nil:
			rec.File, err = cache.SayWords(ctx, *rec.Voice, rec.Part.Sentence, rec.Part.From, rec.Part.To)
		case rec.Voice != nil:
			rec.File, err = cache.Say(ctx, *rec.Voice, rec.Says)
		default:
			rec.File, err = cache.Make(*rec.Sound)
		}
		if err != nil {
			return fmt.Errorf("recording %q (scenario line %d): %w", rec.Name, rec.Line, err)
		}
	}
	return nil
}

// SpeakAbsent synthesises the words of sc's absent recordings (no File, and the words
// in Says: a plain clone has no shared test assets), writes them into dir as 16 kHz WAV
// files and points the recordings at them. It returns the names of the recordings it
// spoke. It holds libespeak-ng while it speaks, which a process can open only once at a
// time: call it before Build, which opens the agent's voice. Made recordings are
// MakeRecordings'.
func SpeakAbsent(ctx context.Context, sc *source.Scenario, dir string) ([]string, error) {
	var absent []int
	for i, rec := range sc.Recordings {
		if rec.File == "" && rec.Says != "" && !rec.Made() {
			absent = append(absent, i)
		}
	}
	if len(absent) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := tts.DefaultConfig()
	cfg.Voice, cfg.Rate = saidVoice, saidRate
	voice, err := espeakng.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("speaking the scenario's absent recordings: %w", err)
	}
	defer voice.Close()
	var spoken []string
	for n, i := range absent {
		rec := &sc.Recordings[i]
		var samples []float32
		err := voice.Synthesize(ctx, rec.Says, func(p tts.Piece) error {
			samples = append(samples, p.Samples...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("recording %q (scenario line %d): speaking %q: %w", rec.Name, rec.Line, rec.Says, err)
		}
		f, err := audio.ResampleFrame(audio.Frame{Samples: samples, Rate: voice.SampleRate(), Channels: 1}, audio.PipelineRate)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, fmt.Sprintf("%02d.wav", n+1))
		if err := audio.WriteWAVFile(path, f, 16); err != nil {
			return nil, err
		}
		rec.File = path
		spoken = append(spoken, rec.Name)
	}
	return spoken, nil
}
