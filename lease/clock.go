package lease

import (
	"sync/atomic"
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

// bootReuse is how much monotonic time a CLOCK_BOOTTIME reading is carried
// forward on the monotonic clock before it is read again. Reading it is a
// system call (Go reads only CLOCK_MONOTONIC through the vDSO), and every
// claim, commit and run start asks for the time left: at thousands of fires
// a second those calls were a tenth of a replica's CPU. The two clocks
// advance together except while the host is suspended, so a carried reading
// is exact unless a suspend fell within those bootReuse of monotonic time;
// then it is as if the check had been made right before the suspend, the
// same as a suspend that falls between any check and the action it
// guards, which no clock read can prevent (the fence does).
const bootReuse = time.Millisecond

// bootSample is a CLOCK_BOOTTIME reading and the monotonic time it was
// taken at.
type bootSample struct{ mono, boot time.Duration }

var lastBoot atomic.Pointer[bootSample]

// boottime reads CLOCK_BOOTTIME, carrying the last reading forward on the
// monotonic clock for up to bootReuse.
func boottime() time.Duration {
	mono := time.Since(processStart)
	if s := lastBoot.Load(); s != nil {
		if d := mono - s.mono; d > -bootReuse && d < bootReuse {
			return s.boot + d
		}
	}
	b := readBoottime()
	lastBoot.Store(&bootSample{mono: mono, boot: b})
	return b
}

// readBoottime reads CLOCK_BOOTTIME itself.
func readBoottime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// CLOCK_BOOTTIME exists on every Linux since 2.6.39; should the call
		// fail anyway, read the monotonic clock, which never runs faster.
		return time.Since(processStart)
	}
	return time.Duration(ts.Nano())
}

var processStart = time.Now()
