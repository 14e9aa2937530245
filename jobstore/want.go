package jobstore

import (
	"context"
	"maps"
	"sync"
	"time"
)

// Want is the set of shards whose jobs a replica holds, changed as it
// acquires and releases shards. Each change has a generation; Wait tells
// when every delivery of WatchHeld reflects one, WaitShard when one
// shard's jobs are delivered (the watch reads newly wanted parts a batch
// at a time and delivers each batch, so the first shards wanted need not
// wait for the last).
type Want struct {
	mu       sync.Mutex
	shards   map[int]int64  // shard -> the token that wants it
	expected map[int]bool   // shards expected to be wanted soon (Expect); nil: none
	expects  uint64         // counts Expect calls, so a replaced lapse does nothing
	window   time.Duration  // how long expected lasts once delivered
	lapse    *time.Timer    // ends expected after its window; nil until armed
	kept     map[int]bool   // the expected shards the last delivery held
	keptSeq  uint64         // the expects of that delivery's holding
	gen      uint64         // of the last change
	served   uint64         // the newest generation delivered
	heldAt   map[int]uint64 // shard -> the newest generation a delivery held it at
	changed  chan struct{}  // cap 1: a change not yet seen by the watch
	wake     chan struct{}  // closed and replaced when served or heldAt moves
}

// NewWant returns an empty Want.
func NewWant() *Want {
	return &Want{shards: map[int]int64{}, heldAt: map[int]uint64{}, changed: make(chan struct{}, 1), wake: make(chan struct{})}
}

// Add wants shard under token (a newer acquisition replaces an older) and
// returns the change's generation. An expected shard that the last
// delivery held counts as held at once: expected unchanged since that
// delivery's holding, every delivery since holds it too, and from now on
// it is wanted.
func (w *Want) Add(shard int, token int64) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shards[shard] = token
	gen := w.bump()
	if w.expected[shard] && w.kept[shard] && w.keptSeq == w.expects {
		w.heldAt[shard] = gen
		w.woke()
	}
	return gen
}

// Remove stops wanting shard, unless a newer token wants it since.
func (w *Want) Remove(shard int, token int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.shards[shard]; ok && t <= token {
		delete(w.shards, shard)
		w.bump()
	}
}

func (w *Want) bump() uint64 {
	w.gen++
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return w.gen
}

// Wait returns once every later delivery reflects generation gen (its
// shards' jobs held), or with ctx's error.
func (w *Want) Wait(ctx context.Context, gen uint64) error { return w.WaitShard(ctx, -1, gen) }

// WaitShard returns once a delivery has held shard's jobs as wanted at
// generation gen or later (every later one holds them too, until the
// shard is no longer wanted), or with ctx's error. shard -1 waits for
// every shard wanted at gen (Wait).
func (w *Want) WaitShard(ctx context.Context, shard int, gen uint64) error {
	for {
		w.mu.Lock()
		done, wake := w.served >= gen || (shard >= 0 && w.heldAt[shard] >= gen), w.wake
		w.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Expect says the replica expects to be wanting shards soon (a replica
// joining: those the assignment will give it). The watch then keeps and
// delivers their parts' jobs as it reads the set, and keeps them current,
// so that the consumer (the scheduler) has them before the grant and Add
// finds them held: its delivery reads nothing and builds nothing new.
// What is not wanted within window of the first delivery after Expect is
// dropped (the window counts from the read that costs the memory, not
// from the call): a replica holds only what it owns. A later Expect
// replaces the earlier.
func (w *Want) Expect(shards []int, window time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.expect(shards)
	w.window = window
}

// expect replaces the expected shards; w.mu is held.
func (w *Want) expect(shards []int) {
	if w.lapse != nil {
		w.lapse.Stop()
		w.lapse = nil
	}
	w.expects++
	w.expected = make(map[int]bool, len(shards))
	for _, s := range shards {
		w.expected[s] = true
	}
	w.bump()
}

// armLapse starts the window of the expected shards, once, at the first
// delivery that held them; w.mu is held.
func (w *Want) armLapse(expects uint64) {
	if len(w.expected) == 0 || w.lapse != nil || expects != w.expects {
		return
	}
	w.lapse = time.AfterFunc(w.window, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.expects == expects { // not replaced since
			w.expect(nil)
		}
	})
}

// wantSnapshot is a Want at one moment, for one read.
type wantSnapshot struct {
	wanted, expected map[int]bool
	gen, expects     uint64
}

func (w *Want) snapshot() wantSnapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := make(map[int]bool, len(w.shards))
	for s := range w.shards {
		m[s] = true
	}
	return wantSnapshot{wanted: m, expected: maps.Clone(w.expected), gen: w.gen, expects: w.expects}
}

// serve records that gen is delivered whole, that the shards held were
// delivered at gen held (a part of a holding: gen stays unserved), and
// that the delivery held the expected shards kept, expected as of expects.
func (w *Want) serve(gen, held uint64, shards, kept []int, expects uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.kept, w.keptSeq = make(map[int]bool, len(kept)), expects
	for _, s := range kept {
		w.kept[s] = true
	}
	w.armLapse(expects)
	moved := false
	if gen > w.served {
		w.served, moved = gen, true
	}
	for _, s := range shards {
		if held > w.heldAt[s] {
			w.heldAt[s], moved = held, true
		}
	}
	if moved {
		w.woke()
	}
}

// woke wakes the waiters; w.mu is held.
func (w *Want) woke() {
	close(w.wake)
	w.wake = make(chan struct{})
}
