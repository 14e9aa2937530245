package poll

import (
	"errors"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	n := 0
	d, err := Until(time.Second, func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || n != 3 || d < 2*Interval {
		t.Fatalf("Until = %v, %v after %d checks; want nil after 3 checks, two intervals apart", d, err, n)
	}
	last := errors.New("still no")
	if _, err := Until(30*time.Millisecond, func() error { return last }); err != last {
		t.Fatalf("Until past its deadline = %v, want the condition's last error", err)
	}
	if _, err := Until(time.Second, True(func() bool { return true })); err != nil {
		t.Fatalf("True(true) = %v", err)
	}
}

func TestMustEvery(t *testing.T) {
	n := 0
	d := MustEvery(t, 20*time.Millisecond, time.Second, "the third check", True(func() bool { n++; return n == 3 }))
	if n != 3 || d < 40*time.Millisecond {
		t.Fatalf("MustEvery returned after %v and %d checks; want 3 checks, two intervals apart", d, n)
	}
}

func TestHoldsEvery(t *testing.T) {
	n := 0
	HoldsEvery(t, time.Millisecond, 20*time.Millisecond, "counting", func() error { n++; return nil })
	if n < 2 {
		t.Fatalf("checked %d times over 20 ms every 1 ms", n)
	}
	ft := &fatalT{TB: t}
	func() {
		defer func() { recover() }()
		HoldsEvery(ft, time.Millisecond, time.Second, "broken", func() error { return errNotYet })
	}()
	if !ft.failed {
		t.Fatal("a condition that does not hold did not fail the test")
	}
}

// fatalT records Fatalf and stops the caller as t.Fatal would.
type fatalT struct {
	testing.TB
	failed bool
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}
