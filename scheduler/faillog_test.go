package scheduler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shardcron/shardcron/config"
)

// lockedBuf is a log sink shared by the scheduler's goroutines and the test.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the decoded JSON log lines whose message starts with prefix.
func (l *lockedBuf) lines(t *testing.T, prefix string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, ln := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		var m map[string]any
		if ln == "" {
			continue
		}
		if err := json.Unmarshal([]byte(ln), &m); err != nil {
			t.Fatalf("log line %q: %v", ln, err)
		}
		if msg, _ := m["msg"].(string); strings.HasPrefix(msg, prefix) {
			out = append(out, m)
		}
	}
	return out
}

// A store failing every write of 40 jobs for 30 seconds is logged by batch
// and state change, not by job: one line when it starts failing (with
// counts), a summary at most every 10 s, one when it recovers (with the
// total). Before, each job's each retry wrote its own line: hundreds here,
// about 4,000 a second at 5,000 fires/s.
func TestFailingStoreLoggedByBatch(t *testing.T) {
	for _, kind := range []string{"claims", "history"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sleepUntil(t0.Add(-time.Second))
				var jobs []config.Job
				for i := range 40 {
					jobs = append(jobs, jobIn(1, fmt.Sprintf("j%d", i), "* * * * * *"))
				}
				buf := &lockedBuf{}
				h := newHarness(t, func(c *Config) { c.Logger = slog.New(slog.NewJSONHandler(buf, nil)) }, jobs...)
				defer h.stop()
				var mu sync.Mutex
				failing := true
				isFailing := func() bool { mu.Lock(); defer mu.Unlock(); return failing }
				msg := "record write outcome unknown; retrying"
				if kind == "claims" {
					h.store.inject = func(Write) (error, bool) {
						if isFailing() {
							return ErrUnknown, false
						}
						return nil, false
					}
				} else {
					msg = "run history not written"
					h.store.histInject = func(HistoryWrite) error {
						if isFailing() {
							return fmt.Errorf("etcdserver: no space: %w", ErrUnknown)
						}
						return nil
					}
				}
				g, _ := h.grant(1, 9, nil)
				h.s.Acquired(g)
				time.Sleep(30 * time.Second)
				synctest.Wait()
				mu.Lock()
				failing = false
				mu.Unlock()
				time.Sleep(5 * time.Second)
				synctest.Wait()

				all := buf.lines(t, msg)
				if len(all) < 3 || len(all) > 6 {
					t.Fatalf("%d lines %q for 40 jobs failing 30 s, want one at the start, a summary every 10 s, one at recovery: %v", len(all), msg, all)
				}
				first, last := all[0], all[len(all)-1]
				if first["msg"] != msg || first["failed"] == nil || first["err"] == nil || first["job"] == nil || first["shard"] == nil {
					t.Errorf("first line lacks counts, error or example: %v", first)
				}
				if last["msg"] != msg+": recovered" || last["failed_total"].(float64) < 40 {
					t.Errorf("last line %v, want recovered with failed_total >= 40", last)
				}
				for _, m := range all[1 : len(all)-1] {
					if m["msg"] != msg+": still failing" || m["failed"].(float64) < 1 {
						t.Errorf("summary line %v", m)
					}
				}
			})
		})
	}
}
