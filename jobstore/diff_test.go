package jobstore

import (
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
)

func TestDiffJobs(t *testing.T) {
	a, b, c := job("a", 1), job("b", 1), job("c", 1)
	b2 := job("b", 2)
	withSince := a
	withSince.Since = time.Now()
	emptyEnv := c
	emptyEnv.Env = map[string]string{}
	h := *c.HTTP
	h.ExpectStatus = []int{}
	emptyEnv.HTTP = &h

	d := DiffJobs([]config.Job{a, b, job("d", 1)}, []config.Job{emptyEnv, b2, withSince})
	want := "+ c\n~ b\n- d\n1 added, 1 changed, 1 removed, 1 unchanged\n"
	if d.String() != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", d, want)
	}
	// Since, order, and nil against empty maps are not changes.
	if d := DiffJobs([]config.Job{a, c}, []config.Job{emptyEnv, withSince}); !d.Empty() || d.Unchanged != 2 {
		t.Fatalf("diff of equal sets = %+v", d)
	}
	if got := (Diff{Unchanged: 3}).String(); got != "no changes (3 jobs unchanged)\n" {
		t.Fatalf("empty diff prints %q", got)
	}
}
