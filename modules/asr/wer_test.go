package asr

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/parley-voice/parley/audio"
	"github.com/parley-voice/parley/internal/testenv"
	"github.com/parley-voice/parley/internal/wer"
)

// streamDecode feeds samples to e in 20 ms pieces as one utterance, asking for a partial
// hypothesis every hop samples, as the module does, and returns the final text.
func streamDecode(t testing.TB, e Engine, samples []float32, hop int) string {
	t.Helper()
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const piece = 320
	since := 0
	for i := 0; i < len(samples); i += piece {
		chunk := samples[i:min(i+piece, len(samples))]
		if err := e.Feed(ctx, chunk); err != nil {
			t.Fatal(err)
		}
		if since += len(chunk); since >= hop {
			since = 0
			if _, err := e.Partial(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, err := e.Final(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h.Text()
}

// TestPocketsphinxWERMatchesCLI measures the word error rate of the pocketsphinx engine
// over every shared recording and checks that it is within one point of Debian's
// `pocketsphinx single` on the same audio (converted to 16 kHz mono 16-bit by sox for
// both, since the command reads only that).
func TestPocketsphinxWERMatchesCLI(t *testing.T) {
	needPocketsphinx(t)
	sox := testenv.Command(t, "sox", testenv.EnvFix)
	cli := testenv.Command(t, "pocketsphinx", testenv.EnvFix)
	dir := filepath.Join(testenv.SharedDir(t), "audio")
	f, err := os.Open(filepath.Join(dir, "transcripts.tsv"))
	if err != nil {
		testenv.Missing(t, "shared/audio/transcripts.tsv", "the shared folder should hold it")
	}
	defer f.Close()
	ts, err := wer.ReadTranscripts(f)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		ts = ts[:min(len(ts), 6)] // pocketsphinx runs at about half real time here
	}
	e, err := NewPocketsphinxEngine(DefaultPocketsphinxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	hop := int(audio.DurationToSamples(DefaultConfig().Hop, audio.PipelineRate))
	tmp := t.TempDir()
	var ours, theirs wer.Result
	for _, tr := range ts {
		conv := filepath.Join(tmp, filepath.Base(tr.File))
		if out, err := exec.Command(sox, filepath.Join(dir, tr.File), "-r", "16000", "-c", "1", "-b", "16", "-e", "signed-integer", conv).CombinedOutput(); err != nil {
			t.Fatalf("sox %s: %v\n%s", tr.File, err, out)
		}
		cmd := exec.Command(cli, "single", conv)
		cmd.Dir = tmp
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pocketsphinx single %s: %v", tr.File, err)
		}
		var res struct {
			T string `json:"t"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
			t.Fatalf("pocketsphinx single %s printed %q: %v", tr.File, out, err)
		}
		fr, err := audio.DecodeWAVFile(conv)
		if err != nil {
			t.Fatal(err)
		}
		got := streamDecode(t, e, fr.Samples, hop)
		o, c := wer.Compare(tr.Text, got), wer.Compare(tr.Text, res.T)
		ours, theirs = ours.Add(o), theirs.Add(c)
		t.Logf("%-50s engine %5.1f%% %q | cli %5.1f%% %q", tr.File, 100*o.Rate(), got, 100*c.Rate(), res.T)
	}
	t.Logf("total: engine %v; pocketsphinx single %v", ours, theirs)
	if d := 100 * (ours.Rate() - theirs.Rate()); d > 1 || d < -1 {
		t.Errorf("engine WER %.2f%% is %.2f points from pocketsphinx single's %.2f%%", 100*ours.Rate(), d, 100*theirs.Rate())
	}
}
