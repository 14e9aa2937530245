package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A time in a log line is a run's identity as often as not (tick=), and
// a manual tick is the request's instant to the microsecond (its
// Shardcron-Tick header and history carry it so): the text log writes
// such times in full, so an operator can find the line of a run the
// receiver saw. slog's text handler writes them to the millisecond.
func TestTextLogWritesTimesInFull(t *testing.T) {
	var logs bytes.Buffer
	log, err := newLogger(&logs, "info", "text")
	if err != nil {
		t.Fatal(err)
	}
	tick := time.Date(2026, 12, 7, 13, 38, 28, 769123000, time.UTC)
	log.Info("run ended", "tick", tick, "at", tick.Truncate(time.Second))
	out := logs.String()
	if !strings.Contains(out, "tick=2026-12-07T13:38:28.769123Z") || !strings.Contains(out, "at=2026-12-07T13:38:28Z") {
		t.Errorf("want the tick to the microsecond and a whole second as such:\n%s", out)
	}
	if !strings.HasPrefix(out, "time=") || strings.Count(out, "time=") != 1 {
		t.Errorf("the record's own time is written once, first:\n%s", out)
	}
}
