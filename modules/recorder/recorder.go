// Package recorder writes the audio IUs it receives to a WAV file on their stream
// timeline (gaps filled with silence), so a session's input can be kept and mixed with
// what the agent said.
package recorder

import (
	"context"
	"fmt"
	"time"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/iu"
)

// Module records audio.Frame IUs (all of one rate and channel count) to Path, or, made
// by NewLinear, an echo canceller's linear output.
type Module struct {
	name   string
	path   string
	bits   int
	linear bool
}

// linearAudio is an echo canceller's linear output (aec.Linear).
type linearAudio interface {
	LinearAudio() audio.Frame
}

// New returns a recorder writing bits-per-sample WAV (16 when 0) to path.
func New(name, path string, bits int) *Module {
	if bits == 0 {
		bits = 16
	}
	return &Module{name: name, path: path, bits: bits}
}

// NewLinear returns a recorder of the linear output an echo canceller sends beside its
// audio (what the overlap module decodes). No file is made when none comes.
func NewLinear(name, path string, bits int) *Module {
	m := New(name, path, bits)
	m.linear = true
	return m
}

// Name implements iu.Module.
func (m *Module) Name() string { return m.name }

// Run implements iu.Module. The file is complete when Run returns, even on error.
func (m *Module) Run(ctx context.Context, p *iu.Ports) (err error) {
	var w *audio.WAVWriter
	var next int64 // stream position the file has reached
	defer func() {
		if w != nil {
			if cerr := w.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("recorder: %w", cerr)
			}
		}
	}()
	for {
		ev, err := p.Next(ctx, time.Time{})
		if err != nil {
			return err
		}
		if ev.Kind == iu.EventInputDone {
			return nil
		}
		if ev.Kind != iu.EventMessage {
			continue
		}
		for _, up := range ev.Message.Updates {
			f, ok := m.audioOf(up.IU.Payload)
			if !ok || up.Type != iu.Add {
				continue
			}
			if w == nil {
				if w, err = audio.CreateWAVFile(m.path, f.Rate, f.Channels, m.bits); err != nil {
					return fmt.Errorf("recorder: %w", err)
				}
				next = f.Start
			}
			if gap := f.Start - next; gap > 0 {
				if err := w.WriteSamples(make([]float32, gap*int64(f.Channels))); err != nil {
					return fmt.Errorf("recorder: %w", err)
				}
				next = f.Start
			}
			skip := next - f.Start // audio already written (a replayed block)
			if skip >= int64(f.Len()) {
				continue
			}
			if err := w.WriteSamples(f.Samples[skip*int64(f.Channels):]); err != nil {
				return fmt.Errorf("recorder: %w", err)
			}
			next = f.End()
		}
	}
}

// audioOf returns the audio the recorder keeps of a payload.
func (m *Module) audioOf(p iu.Payload) (audio.Frame, bool) {
	if m.linear {
		l, ok := p.(linearAudio)
		if !ok {
			return audio.Frame{}, false
		}
		return l.LinearAudio(), true
	}
	f, ok := p.(audio.Frame)
	return f, ok
}
