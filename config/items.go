package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A sharded job (Items or ItemNames) runs several items on every tick, each
// a unit of its own: its own shard, claim, record, idempotency key, fencing
// token, retries and history. A unit is named "<job>:<item>", the item being
// its name (ItemNames) or its index (Items); ':' is in no job name, so no
// unit's name is another job's, and "<job>:" prefixes exactly the job's
// units in every key that ends in a job name.

// Features lists what of the jobs file this build runs that an older
// release would misread (it would ignore the field and run something else):
// replicas publish it, and an apply that uses one is refused while a member
// lacks it. "items": sharded jobs (an older release would run the job once
// per tick, as a job without items).
var Features = []string{FeatureItems}

// FeatureItems names sharded jobs in Features.
const FeatureItems = "items"

// UsedFeatures returns the Features that set's jobs use, in Features order.
func UsedFeatures(jobs []Job) []string {
	for i := range jobs {
		if jobs[i].ItemCount() > 0 {
			return []string{FeatureItems}
		}
	}
	return nil
}

// Bounds of a sharded job.
const (
	MaxItems       = 4096
	MaxItemNameLen = 63
	// UnitSep separates a sharded job's name from its item in a unit's name.
	UnitSep = ":"
)

// The variables an item's run carries (HTTP headers carry the same as
// Shardcron-Item, -Items and -Item-Name), which the job's url, header
// values, body, exec command and env may also reference as ${NAME}.
const (
	VarItem     = "SHARDCRON_ITEM"      // the item's index, from 0
	VarItems    = "SHARDCRON_ITEMS"     // how many items the job has
	VarItemName = "SHARDCRON_ITEM_NAME" // the item's name (item_names), else its index
)

// itemVars are the variables only a sharded job may reference.
var itemVars = []string{VarItem, VarItems, VarItemName}

func isItemVar(name string) bool {
	return name == VarItem || name == VarItems || name == VarItemName
}

// Item is one item of a sharded job.
type Item struct {
	Index int    // from 0
	Count int    // the job's number of items
	Name  string // its name in ItemNames, else its index in decimal
}

// IsZero reports whether it is no item (the run of a job without items).
func (it Item) IsZero() bool { return it.Count == 0 }

// Var returns the value of an item variable (VarItem, VarItems,
// VarItemName), false for any other name or for no item.
func (it Item) Var(name string) (string, bool) {
	if it.IsZero() {
		return "", false
	}
	switch name {
	case VarItem:
		return strconv.Itoa(it.Index), true
	case VarItems:
		return strconv.Itoa(it.Count), true
	case VarItemName:
		return it.Name, true
	}
	return "", false
}

// ItemCount is how many items the job runs per tick: 0 for a job that is
// not sharded.
func (j *Job) ItemCount() int {
	if len(j.ItemNames) > 0 {
		return len(j.ItemNames)
	}
	return j.Items
}

// Item returns the job's item i (0 <= i < ItemCount()).
func (j *Job) Item(i int) Item {
	it := Item{Index: i, Count: j.ItemCount(), Name: strconv.Itoa(i)}
	if len(j.ItemNames) > 0 {
		it.Name = j.ItemNames[i]
	}
	return it
}

// UnitName is the name of the job's unit for it: the job's name for no
// item, else "<job>:<item name>".
func UnitName(job string, it Item) string {
	if it.IsZero() {
		return job
	}
	return job + UnitSep + it.Name
}

// SplitUnit returns the job and the item name of a unit's name; item is ""
// for the unit of a job without items.
func SplitUnit(unit string) (job, item string) {
	job, item, _ = strings.Cut(unit, UnitSep)
	return job, item
}

// ItemsAddedAfter is ItemsAdded of j, the version of a job that follows
// prev (of the same name), applied at now: prev's times of the items j
// keeps, and now for each item prev lacked — new, or dropped by prev and
// added again, whose record went with the drop. A job that gains items
// after its first version gains them all now. The job store sets it; the
// simulator, which stands in for it, calls it too.
func (j *Job) ItemsAddedAfter(prev *Job, now time.Time) map[string]time.Time {
	n := j.ItemCount()
	if n == 0 {
		return nil
	}
	had := make(map[string]bool, prev.ItemCount())
	for k := range prev.ItemCount() {
		had[prev.Item(k).Name] = true
	}
	var out map[string]time.Time
	for k := range n {
		name := j.Item(k).Name
		t, ok := prev.ItemsAdded[name]
		switch {
		case !had[name]:
			t, ok = now, true
		case !ok:
			continue
		}
		if out == nil {
			out = make(map[string]time.Time)
		}
		out[name] = t
	}
	return out
}

// UnitSince is the Since of the job's unit for it: the later of the job's
// Since and when the item was added (ItemsAdded), so an item added to a
// running job has no missed ticks from before it existed.
func (j *Job) UnitSince(it Item) time.Time {
	if t, ok := j.ItemsAdded[it.Name]; ok && t.After(j.Since) {
		return t
	}
	return j.Since
}

// UnitNames returns the name of every unit of jobs: each job without items,
// each item of a sharded job. What is not among them is gone (records,
// history).
func UnitNames(jobs []Job) map[string]bool {
	names := make(map[string]bool, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		if j.ItemCount() == 0 {
			names[j.Name] = true
			continue
		}
		for k := range j.ItemCount() {
			names[UnitName(j.Name, j.Item(k))] = true
		}
	}
	return names
}

// ItemIndex returns the index of the job's item named name (a name in
// ItemNames, else an index in decimal), false if it has none.
func (j *Job) ItemIndex(name string) (int, bool) {
	if len(j.ItemNames) > 0 {
		for i, n := range j.ItemNames {
			if n == name {
				return i, true
			}
		}
		return 0, false
	}
	i, err := strconv.Atoi(name)
	if err != nil || i < 0 || i >= j.Items || strconv.Itoa(i) != name {
		return 0, false
	}
	return i, true
}

// validateItems checks items and item_names.
func validateItems(j *Job, bad func(field, format string, args ...any)) {
	switch {
	case j.Items != 0 && len(j.ItemNames) > 0:
		bad("items", "the job also has item_names: give one of items (a count) or item_names")
	case j.Items < 0 || j.Items > MaxItems:
		bad("items", "%d is not between 1 and %d", j.Items, MaxItems)
	case len(j.ItemNames) > MaxItems:
		bad("item_names", "has %d names, more than the limit of %d", len(j.ItemNames), MaxItems)
	}
	seen := make(map[string]int, len(j.ItemNames))
	for i, n := range j.ItemNames {
		field := fmt.Sprintf("item_names[%d]", i)
		switch {
		case n == "":
			bad(field, "is empty")
		case len(n) > MaxItemNameLen:
			bad(field, "is %d characters, more than the limit of %d", len(n), MaxItemNameLen)
		case !jobName.MatchString(n):
			bad(field, "%q must match [a-z0-9][a-z0-9._-]* (lower case letters, digits, '.', '_' and '-')", n)
		}
		if first, dup := seen[n]; dup {
			bad(field, "%q is also item_names[%d]: item names are unique", n, first)
		} else {
			seen[n] = i
		}
	}
}
