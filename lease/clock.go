package lease

import (
	"time"

	"golang.org/x/sys/unix"
)

// The safe deadline is measured on CLOCK_BOOTTIME: it keeps counting while
// the host is suspended, whereas Go's monotonic clock (CLOCK_MONOTONIC on
// Linux) stops, and etcd's lease keeps expiring on etcd's hosts meanwhile. A
// deadline on the monotonic clock would let a node wake from a suspend and
// believe it still holds leases that expired during the suspend.

// clock reads a time in nanoseconds on a clock that never goes back and
// counts suspended time. Tests may shift it.
type clock func() time.Duration

// boottime reads CLOCK_BOOTTIME.
func boottime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// CLOCK_BOOTTIME exists on every Linux since 2.6.39; should the call
		// fail anyway, read the monotonic clock, which never runs faster.
		return time.Since(processStart)
	}
	return time.Duration(ts.Nano())
}

var processStart = time.Now()
