package procstat

import (
	"os"
	"slices"
	"strconv"
	"testing"
)

func TestFieldsCountFromTheLastParenthesis(t *testing.T) {
	f, err := Fields([]byte("4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 0 0 0 0 250 50 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f[0] != "S" || f[1] != "17" || f[11] != "250" || f[12] != "50" {
		t.Fatalf("fields %q: want state S, parent 17, utime 250, stime 50", f)
	}
	for _, bad := range []string{"garbage", "1 (x)", ""} {
		if f, err := Fields([]byte(bad)); err == nil {
			t.Errorf("Fields(%q) = %q, want an error", bad, f)
		}
	}
}

func TestReadThisProcessAndThread(t *testing.T) {
	pid := os.Getpid()
	f, err := Read(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f[1] != strconv.Itoa(os.Getppid()) {
		t.Errorf("parent %s, want %d", f[1], os.Getppid())
	}
	// The main thread's id is the pid; it may be running or asleep.
	if f, err = Read(pid, pid); err != nil || len(f[0]) != 1 {
		t.Errorf("the main thread's stat = %q, %v; want a one-letter state first", f, err)
	}
	// Threads names the main thread (its id is the pid) and no other twice.
	tids, err := Threads(pid)
	if err != nil || !slices.Contains(tids, pid) || len(slices.Compact(slices.Sorted(slices.Values(tids)))) != len(tids) {
		t.Errorf("Threads(%d) = %v, %v; want the main thread among distinct ids", pid, tids, err)
	}
}
