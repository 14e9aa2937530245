package scheduler

// ranked is an entry of a binHeap: before orders two entries.
type ranked[T any] interface{ before(T) bool }

// binHeap is a binary min-heap of entries kept by value. Its push and pop
// are container/heap's, step for step (so entries of equal rank come out in
// the same order), but typed: through heap.Interface every push and pop
// boxed an entry, and every comparison was an interface call that chased
// the entries' pointers; a burst's thousands of waiting ticks made that a
// twentieth of a replica's CPU.
type binHeap[T ranked[T]] []T

func (h *binHeap[T]) push(x T) {
	*h = append(*h, x)
	h.up(len(*h) - 1)
}

func (h *binHeap[T]) pop() T {
	old := *h
	n := len(old) - 1
	old[0], old[n] = old[n], old[0]
	old.down(0, n)
	x := old[n]
	var zero T
	old[n] = zero
	*h = old[:n]
	return x
}

func (h binHeap[T]) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i, len(h))
	}
}

func (h binHeap[T]) up(j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h[j].before(h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (h binHeap[T]) down(i, n int) {
	for {
		j := 2*i + 1 // left child
		if j >= n || j < 0 {
			return
		}
		if r := j + 1; r < n && h[r].before(h[j]) {
			j = r
		}
		if !h[j].before(h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
