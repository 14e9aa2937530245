package scheduler

import (
	"log/slog"
	"time"
)

// failLogEvery spaces the summaries of a store that keeps failing.
const failLogEvery = 10 * time.Second

// failLog reports the failures of one kind of store write (record writes,
// run history) by batch instead of by job: one line when the store starts
// failing, one summary at most every failLogEvery while it keeps failing,
// and one when it works again, each with counts and the shard, token and
// job of one failed write as an example. At thousands of fires a second a line per job buried the news.
// It is owned by the scheduler's loop goroutine.
type failLog struct {
	msg       string // the failing line; the others say "still" and "recovered"
	failing   bool
	since     time.Time // when the store started failing
	lastLine  time.Time
	failed    int   // failures since the last line
	total     int   // failures since the store started failing
	inBatch   int   // failures in the batch being reported
	example   []any // logArgs of the first failure since the last line
	err       error // the latest failure
	retryInfo []any // extra args of the latest failure, such as retry_in
}

// fail counts one failed write of the batch being reported.
func (f *failLog) fail(args []any, err error, extra ...any) {
	f.failed++
	f.total++
	f.inBatch++
	if f.example == nil {
		f.example = args
	}
	f.err, f.retryInfo = err, extra
}

// batch ends a batch of n writes, logging a change of state or a due
// summary.
func (f *failLog) batch(log *slog.Logger, n int, now time.Time) {
	failed := f.inBatch
	f.inBatch = 0
	switch {
	case failed > 0 && !f.failing:
		f.failing, f.since = true, now
		f.line(log, f.msg, now, "failed", failed, "written", n-failed)
	case f.failing && failed == 0 && n > 0:
		f.failing = false
		log.Info(f.msg+": recovered", "failed_total", f.total, "failing_for", now.Sub(f.since).Round(time.Millisecond))
		f.total, f.failed, f.example = 0, 0, nil
	case f.failing && f.failed > 0 && now.Sub(f.lastLine) >= failLogEvery:
		f.line(log, f.msg+": still failing", now, "failed", f.failed, "failed_total", f.total,
			"failing_for", now.Sub(f.since).Round(time.Millisecond))
	}
}

// line logs a warning with the counts, the latest error and the example
// job's shard, token and job.
func (f *failLog) line(log *slog.Logger, msg string, now time.Time, counts ...any) {
	args := append(counts, "err", f.err)
	args = append(args, f.retryInfo...)
	log.Warn(msg, append(args, f.example...)...)
	f.lastLine, f.failed, f.example = now, 0, nil
}
