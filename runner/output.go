package runner

import (
	"fmt"
	"strings"
	"sync"
)

// boundedOutput keeps at most max bytes of what is written to it: the first
// half and the last half, with a marker in between saying how much was
// dropped. Writes never fail, so a chatty job is never blocked or broken by
// the bound. Safe for concurrent use.
type boundedOutput struct {
	mu      sync.Mutex
	max     int
	head    []byte // the first max/2 bytes
	tail    []byte // ring of the last max-max/2 bytes once head is full
	next    int    // index in tail of the oldest byte once tail is full
	total   int64  // every byte written
	dropped int64  // bytes neither in head nor in tail
}

func newBoundedOutput(max int) *boundedOutput {
	return &boundedOutput{max: max}
}

func (b *boundedOutput) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	headMax := b.max / 2
	if room := headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	tailMax := b.max - headMax
	for len(p) > 0 && tailMax > 0 {
		if len(b.tail) < tailMax {
			k := min(tailMax-len(b.tail), len(p))
			b.tail = append(b.tail, p[:k]...)
			p = p[k:]
			continue
		}
		// Full ring: overwrite the oldest bytes.
		k := min(tailMax-b.next, len(p))
		copy(b.tail[b.next:], p[:k])
		b.dropped += int64(k)
		b.next = (b.next + k) % tailMax
		p = p[k:]
	}
	b.dropped += int64(len(p)) // only when max is 0 or 1
	return n, nil
}

// String returns the kept output, valid UTF-8, with the truncation marker
// when bytes were dropped.
func (b *boundedOutput) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	s.Write(b.head)
	if b.dropped > 0 {
		fmt.Fprintf(&s, "\n[shardcron: output truncated, %d of %d bytes dropped]\n", b.dropped, b.total)
	}
	s.Write(b.tail[b.next:])
	s.Write(b.tail[:b.next])
	return strings.ToValidUTF8(s.String(), "\uFFFD")
}

// truncated reports whether bytes were dropped.
func (b *boundedOutput) truncated() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped > 0
}
