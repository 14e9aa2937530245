// Package poll waits for a condition in tests: it checks it at a short
// interval until it holds or a deadline passes, so no test has a sleep
// standing in for a condition. One implementation for every package's
// tests.
package poll

import (
	"errors"
	"testing"
	"time"
)

// Interval is how often a condition is checked.
const Interval = 10 * time.Millisecond

// errNotYet is what a boolean condition reports while it does not hold.
var errNotYet = errors.New("condition not met")

// Until checks cond now and every Interval until it returns nil or timeout
// has passed. It returns how long that took and, when the deadline passed,
// the condition's last error.
func Until(timeout time.Duration, cond func() error) (time.Duration, error) {
	return UntilEvery(Interval, timeout, cond)
}

// UntilEvery is Until checking every interval, for conditions that are
// costly to check (a process to start, a cluster-wide read).
func UntilEvery(interval, timeout time.Duration, cond func() error) (time.Duration, error) {
	start := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), err
		}
		<-tick.C
	}
}

// Must is Until that fails t, naming what it waited for.
func Must(t testing.TB, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	return MustEvery(t, Interval, timeout, what, cond)
}

// MustEvery is Must checking every interval, for conditions that are
// costly to check.
func MustEvery(t testing.TB, interval, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	d, err := UntilEvery(interval, timeout, cond)
	if err != nil {
		t.Fatalf("%s: not within %v: %v", what, timeout, err)
	}
	return d
}

// True adapts a boolean condition for Until and Must.
func True(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}
}

// HoldsEvery checks cond every interval for d and fails t at the first
// check it does not hold: for what must not happen (a wrong re-run), where
// there is no event to wait for, checked throughout rather than once
// after a sleep.
func HoldsEvery(t testing.TB, interval, d time.Duration, what string, cond func() error) {
	t.Helper()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for end := time.Now().Add(d); ; {
		if err := cond(); err != nil {
			t.Fatalf("%s: broken: %v", what, err)
		}
		if !time.Now().Before(end) {
			return
		}
		<-tick.C
	}
}
