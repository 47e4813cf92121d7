package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/engines/espeak"
	"github.com/parley-voice/parley/internal/regularfile"
	"github.com/parley-voice/parley/iu"
	"github.com/parley-voice/parley/modules/tts"
	"github.com/parley-voice/parley/modules/tts/espeakng"
	"github.com/parley-voice/parley/modules/tts/normalize"
)

func sayCommand() command {
	return command{
		Name:    "say",
		Summary: "speak text through the TTS module: write a WAV and print the word timings",
		Run:     runSay,
	}
}

// wordTiming is one word of the spoken text, from its chunks.
type wordTiming struct {
	index      int
	start, end time.Duration
	charStart  int
	charEnd    int
	word       string
}

func runSay(ctx context.Context, a *app, args []string) error {
	fs := newFlags(a, "say", `"text" (or - to read standard input)`)
	cfg := tts.DefaultConfig()
	out := fs.String("o", "say.wav", "WAV file to write; a FIFO or a device (/dev/stdout) is streamed to, - is standard output (the report then goes to standard error)")
	fs.StringVar(&cfg.Voice, "voice", cfg.Voice, "espeak-ng voice or language (see --voices)")
	fs.IntVar(&cfg.Rate, "rate", cfg.Rate, "speaking rate in words per minute (80-450)")
	fs.IntVar(&cfg.Pitch, "pitch", cfg.Pitch, "base pitch (1-100)")
	fs.IntVar(&cfg.Volume, "volume", cfg.Volume, "volume (1-200, 100 is normal)")
	fs.DurationVar(&cfg.ChunkDuration, "chunk", cfg.ChunkDuration, "longest audio chunk (at most 40ms)")
	fs.StringVar(&cfg.DataPath, "data", cfg.DataPath, "directory holding espeak-ng-data (default: the library's)")
	voices := fs.Bool("voices", false, "list the installed espeak-ng voices and exit")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	text := strings.Join(pos, " ")
	if text == "-" {
		b, err := regularfile.ReadAll(os.Stdin, maxSayBytes, "standard input")
		if err != nil {
			return fmt.Errorf("reading the text to say: %w", err)
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" && !*voices {
		fs.Usage()
		return usageErrorf("no text to say")
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	engine, err := espeakng.New(cfg)
	var unknown *espeak.VoiceError
	if errors.As(err, &unknown) {
		return usageErrorf("--voice: %v", unknown)
	}
	if err != nil {
		return err
	}
	defer engine.Close()
	if *voices {
		return printVoices(ctx, a.stdout, engine)
	}

	chunks, err := speak(ctx, a, cfg, engine, text)
	if err != nil {
		return err
	}
	pcm := audio.Frame{Rate: engine.SampleRate(), Channels: 1}
	for _, c := range chunks {
		pcm.Samples = append(pcm.Samples, c.Audio.Samples...)
	}
	report := a.stdout
	if *out == "-" {
		report = a.stderr
	}
	wrote, err := writeSaid(ctx, a, *out, pcm)
	if err != nil {
		return err
	}
	fmt.Fprintf(report, "%s: %.2f s at %d Hz in %d chunks\n", wrote, pcm.Duration().Seconds(), pcm.Rate, len(chunks))
	if spoken := normalize.Normalize(text).Spoken; spoken != text {
		fmt.Fprintf(report, "spoken as: %s\n", spoken)
	}
	tw := tabwriter.NewWriter(report, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "start\tend\tbytes\tword")
	for _, w := range wordTimings(chunks) {
		fmt.Fprintf(tw, "%.3f\t%.3f\t%d-%d\t%s\n", w.start.Seconds(), w.end.Seconds(), w.charStart, w.charEnd, w.word)
	}
	return tw.Flush()
}

// maxSayBytes bounds the text 'agent say -' reads from standard input (hours of speech).
const maxSayBytes = 1 << 20

// writeSaid writes the speech to out as a WAV file and says where it went: "-" is
// standard output, a FIFO or a character device is streamed to in place, and a
// regular file or a new path is written whole, atomically (anything else is refused and
// left as it is).
func writeSaid(ctx context.Context, a *app, out string, pcm audio.Frame) (string, error) {
	if out == "-" {
		if err := audio.EncodeWAV(a.stdout, pcm, 16); err != nil {
			return "", fmt.Errorf("writing the WAV to standard output: %w", err)
		}
		return "streamed to standard output", nil
	}
	if !regularfile.IsStream(out) {
		if err := audio.WriteWAVFile(out, pcm, 16); err != nil {
			return "", err
		}
		return "wrote " + out, nil
	}
	f, err := regularfile.OpenStream(ctx, out, 0o644)
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriter(f)
	err = audio.EncodeWAV(bw, pcm, 16)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("streaming the WAV to %s: %w", out, err)
	}
	return "streamed to " + out, nil
}

// speak runs text through the TTS module in a small network and returns its chunks.
func speak(ctx context.Context, a *app, cfg tts.Config, engine tts.Engine, text string) ([]tts.Chunk, error) {
	m, err := tts.New("tts", cfg, engine)
	if err != nil {
		return nil, err
	}
	source := iu.ModuleFunc{ModuleName: "say", Fn: func(ctx context.Context, p *iu.Ports) error {
		u := p.NewIU(tts.Text{Text: text})
		return p.Send(ctx, iu.AddOf(u), iu.CommitOf(u))
	}}
	var chunks []tts.Chunk // owned by the sink's goroutine until the network has finished
	sink := iu.ModuleFunc{ModuleName: "sink", Fn: func(ctx context.Context, p *iu.Ports) error {
		for {
			ev, err := p.Next(ctx, time.Time{})
			if err != nil {
				return err
			}
			switch ev.Kind {
			case iu.EventInputDone:
				return nil
			case iu.EventMessage:
				for _, up := range ev.Message.Updates {
					if c, ok := up.IU.Payload.(tts.Chunk); ok && up.Type == iu.Add {
						chunks = append(chunks, c)
					}
				}
			}
		}
	}}
	net := iu.NewNetwork(iu.WithLogger(a.log))
	for _, err := range []error{net.Add(source, m, sink), net.Connect(source, m), net.Connect(m, sink)} {
		if err != nil {
			return nil, err
		}
	}
	if err := net.Run(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return chunks, nil
}

// wordTimings gathers each word's first and last chunk; pauses (word -1) belong to no word.
func wordTimings(chunks []tts.Chunk) []wordTiming {
	var out []wordTiming
	for _, c := range chunks {
		if c.WordIndex < 0 {
			continue
		}
		start, end := c.Audio.StartTime(), audio.SamplesToDuration(c.Audio.End(), c.Audio.Rate)
		if n := len(out); n > 0 && out[n-1].index == c.WordIndex {
			out[n-1].end = end
			continue
		}
		out = append(out, wordTiming{index: c.WordIndex, start: start, end: end, charStart: c.CharStart, charEnd: c.CharEnd, word: c.Word()})
	}
	return out
}

func printVoices(ctx context.Context, w io.Writer, engine *espeakng.Engine) error {
	vs, err := engine.Synth().Voices(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "languages\tname\tidentifier")
	for _, v := range vs {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.Join(v.Languages, ","), v.Name, v.Identifier)
	}
	return tw.Flush()
}
