package runner

import (
	"bytes"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// ctlReader reads the replica's messages on the supervisor's stdin without
// blocking. The supervisor reads every message sent so far before it judges
// the allowance (watch), so one that was descheduled (a starved host)
// judges it on the replica's latest extension, never on one sent seconds
// ago while newer ones waited in the pipe: a goroutine forwarding one line
// at a time left that to which of two ready goroutines ran first.
type ctlReader struct {
	f       *os.File // held: its finalizer would close fd
	fd      int
	pending []byte   // read, not yet a whole line
	lines   []string // whole lines not yet taken
	closed  bool     // the pipe ended: the replica closed it or died
}

func newCtlReader(f *os.File) (*ctlReader, error) {
	// Fd leaves f in blocking mode; every read here goes to fd itself,
	// non-blocking, and never through f.
	fd := int(f.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	return &ctlReader{f: f, fd: fd}, nil
}

// drain reads whatever the pipe holds now and splits off its whole lines.
func (c *ctlReader) drain() {
	var buf [4096]byte
	for !c.closed {
		n, err := unix.Read(c.fd, buf[:])
		if n > 0 {
			c.pending = append(c.pending, buf[:n]...)
			continue
		}
		if errors.Is(err, unix.EINTR) {
			continue
		}
		// EAGAIN: nothing more for now. 0 bytes without an error is the
		// end of the pipe; any other error ends it too.
		c.closed = !errors.Is(err, unix.EAGAIN)
		break
	}
	for {
		i := bytes.IndexByte(c.pending, '\n')
		if i < 0 {
			return
		}
		c.lines = append(c.lines, string(c.pending[:i+1]))
		c.pending = c.pending[i+1:]
	}
}

// take returns every whole line sent so far.
func (c *ctlReader) take() []string {
	c.drain()
	lines := c.lines
	c.lines = nil
	return lines
}

// next waits for the next line; false once the pipe ended without one.
func (c *ctlReader) next() (string, bool) {
	for {
		c.drain()
		if len(c.lines) > 0 {
			line := c.lines[0]
			c.lines = c.lines[1:]
			return line, true
		}
		if c.closed {
			return "", false
		}
		c.wait()
	}
}

// wait blocks until the pipe has something to read or ended.
func (c *ctlReader) wait() {
	fds := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
