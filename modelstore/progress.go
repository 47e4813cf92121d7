package modelstore

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Bar draws a one-line progress bar with rate and time left. On a terminal it redraws
// in place; otherwise (Plain) it prints a line every 10%.
type Bar struct {
	w       io.Writer
	label   string
	plain   bool
	start   time.Time
	last    time.Time
	lastPct int
	now     func() time.Time
}

// NewBar returns a bar writing to w; plain selects line-per-step output for logs and pipes.
func NewBar(w io.Writer, label string, plain bool) *Bar {
	return &Bar{w: w, label: label, plain: plain, now: time.Now, lastPct: -1}
}

// Update implements Progress.
func (b *Bar) Update(done, total int64) {
	now := b.now()
	if b.start.IsZero() {
		b.start = now
	}
	pct := -1
	if total > 0 {
		pct = int(done * 100 / total)
	}
	if b.plain {
		if pct/10 == b.lastPct/10 && b.lastPct >= 0 {
			return
		}
		b.lastPct = pct
		fmt.Fprintln(b.w, b.line(done, total, now))
		return
	}
	if now.Sub(b.last) < 100*time.Millisecond && done != total {
		return
	}
	b.last = now
	fmt.Fprint(b.w, "\r"+b.line(done, total, now)+"\x1b[K")
}

// Done implements Progress.
func (b *Bar) Done() {
	if !b.plain {
		fmt.Fprintln(b.w)
	}
}

func (b *Bar) line(done, total int64, now time.Time) string {
	elapsed := now.Sub(b.start).Seconds()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(done) / elapsed
	}
	if total <= 0 {
		return fmt.Sprintf("%s %s %s/s", b.label, humanBytes(done), humanBytes(int64(rate)))
	}
	const width = 30
	filled := int(done * width / total)
	eta := "?"
	if rate > 0 {
		eta = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	return fmt.Sprintf("%s [%s%s] %3d%% %s/%s %s/s eta %s", b.label,
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
		done*100/total, humanBytes(done), humanBytes(total), humanBytes(int64(rate)), eta)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
