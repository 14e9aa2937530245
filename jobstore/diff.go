package jobstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/shardcron/shardcron/config"
)

// Diff is what changes from one job set to another, by job name. Since is
// not part of a job's definition: two jobs that differ only in Since are
// unchanged, and the order of jobs in a set does not matter.
type Diff struct {
	Added     []string `json:"added"`     // in next only, sorted
	Removed   []string `json:"removed"`   // in current only, sorted
	Changed   []string `json:"changed"`   // in both, with a different definition, sorted
	Unchanged int      `json:"unchanged"` // in both, identical
	// Suspended lists the jobs of next that an override (`shardcron
	// suspend`) keeps suspended whatever the file says, sorted. They are
	// not changes: the apply keeps them as they are.
	Suspended []string `json:"kept_suspended"`
}

// Empty reports whether the two sets hold the same jobs.
func (d Diff) Empty() bool { return len(d.Added)+len(d.Removed)+len(d.Changed) == 0 }

// String lists the changes one job a line ("+ added", "~ changed",
// "- removed"), then a summary line, as `apply --dry-run` prints them.
func (d Diff) String() string {
	var b strings.Builder
	for _, n := range d.Added {
		fmt.Fprintf(&b, "+ %s\n", n)
	}
	for _, n := range d.Changed {
		fmt.Fprintf(&b, "~ %s\n", n)
	}
	for _, n := range d.Removed {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	for _, n := range d.Suspended {
		fmt.Fprintf(&b, "= %s: suspended by `shardcron suspend`, kept (`shardcron resume %s` lifts it)\n", n, n)
	}
	if d.Empty() {
		fmt.Fprintf(&b, "no changes (%d jobs unchanged)\n", d.Unchanged)
		return b.String()
	}
	fmt.Fprintf(&b, "%d added, %d changed, %d removed, %d unchanged\n", len(d.Added), len(d.Changed), len(d.Removed), d.Unchanged)
	return b.String()
}

// DiffJobs compares two job sets by name. Each set must have unique names.
func DiffJobs(current, next []config.Job) Diff {
	d, _ := diffJobs(current, next)
	return d
}

// diffJobs is DiffJobs that also says, for each job of next, whether
// current holds it with the same definition.
func diffJobs(current, next []config.Job) (Diff, []bool) {
	var d Diff
	same := make([]bool, len(next))
	cur := make(map[string]int, len(current))
	for i := range current {
		cur[current[i].Name] = i
	}
	seen := make(map[string]bool, len(next))
	for i := range next {
		name := next[i].Name
		seen[name] = true
		j, ok := cur[name]
		switch {
		case !ok:
			d.Added = append(d.Added, name)
		case !sameSpec(&current[j], &next[i]):
			d.Changed = append(d.Changed, name)
		default:
			d.Unchanged++
			same[i] = true
		}
	}
	for i := range current {
		if !seen[current[i].Name] {
			d.Removed = append(d.Removed, current[i].Name)
		}
	}
	sort.Strings(d.Added)
	sort.Strings(d.Removed)
	sort.Strings(d.Changed)
	return d, same
}

// sameSpec reports whether two jobs have the same definition. Deep
// equality decides the common case cheaply; when it says no, the stored
// encodings decide, so that differences the store does not keep (a nil
// against an empty map) do not count as changes.
func sameSpec(a, b *config.Job) bool {
	x, y := *a, *b
	x.Since, y.Since = time.Time{}, time.Time{}
	x.Resumed, y.Resumed = time.Time{}, time.Time{}
	x.SuspendedAt, y.SuspendedAt = time.Time{}, time.Time{}
	x.Rescheduled, y.Rescheduled = time.Time{}, time.Time{}
	x.ItemsAdded, y.ItemsAdded = nil, nil
	if reflect.DeepEqual(x, y) {
		return true
	}
	return bytes.Equal(specOf(a), specOf(b))
}

// specOf is a job's definition without the job store's stamps, in the encoding it is stored
// in, so that nil and empty maps (both omitted) compare equal as they would
// after a round trip through etcd. Job has only JSON-encodable fields, so
// Marshal cannot fail; a failure would make every such job "changed",
// which is the safe direction.
func specOf(j *config.Job) []byte {
	c := *j
	c.Since, c.Resumed, c.SuspendedAt, c.Rescheduled, c.ItemsAdded = time.Time{}, time.Time{}, time.Time{}, time.Time{}, nil
	b, err := json.Marshal(&c)
	if err != nil {
		return []byte(err.Error())
	}
	return b
}
