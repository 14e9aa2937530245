package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// newLogger builds the process logger: text by default, JSON on request.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "", "text":
		opts.ReplaceAttr = fullTimes
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// fullTimes writes the times a text record carries (a tick, a deadline)
// as RFC 3339 in full, as the JSON handler and a run's headers do: slog's
// text handler cuts them to the millisecond, and a manual tick is the
// request's instant to the microsecond. The record's own time keeps the
// handler's format.
func fullTimes(groups []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindTime && (len(groups) > 0 || a.Key != slog.TimeKey) {
		a.Value = slog.StringValue(a.Value.Time().Format(time.RFC3339Nano))
	}
	return a
}

// prefixWriter writes every line with a prefix, so the replicas of `dev`
// are told apart at a glance. Writes from several replicas interleave by
// whole lines: slog handlers write one record per Write call.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix []byte
}

func (p prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var buf bytes.Buffer
	for line := range bytes.Lines(b) {
		buf.Write(p.prefix)
		buf.Write(line)
	}
	if _, err := p.w.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}
