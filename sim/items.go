package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/shardcron/shardcron/config"
)

// Sharded jobs (Config.Items): each item of a job is a unit of its own
// (config.UnitName), in the shard of its unit's name, with its own record,
// trigger requests and history; the checker holds each unit to the
// contract on its own.

// itemNames is the pool item_names are drawn from.
var itemNames = []string{"eu", "us", "ap", "sa", "af", "oc", "me"}

// itemize makes j a sharded job: 2-6 items, or 2-4 item names.
func itemize(j *config.Job, r *rand.Rand) {
	if r.IntN(2) == 0 {
		j.Items = 2 + r.IntN(5)
		return
	}
	perm := r.Perm(len(itemNames))[:2+r.IntN(3)]
	for _, i := range perm {
		j.ItemNames = append(j.ItemNames, itemNames[i])
	}
}

// editItems changes a sharded job's items: its count grows or shrinks
// (1-7), or its names are reordered, one renamed, dropped or added. The
// names are a new slice: older job sets keep theirs. It says what changed.
func editItems(j *config.Job, r *rand.Rand) string {
	if j.Items > 0 {
		n := 1 + r.IntN(6)
		if n >= j.Items {
			n++ // never the same count
		}
		j.Items = n
		return fmt.Sprintf("items %d", n)
	}
	names := slices.Clone(j.ItemNames)
	var unused []string
	for _, n := range itemNames {
		if !slices.Contains(names, n) {
			unused = append(unused, n)
		}
	}
	switch k := r.IntN(4); {
	case k == 0:
		r.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
	case k == 1 && len(unused) > 0:
		names[r.IntN(len(names))] = unused[r.IntN(len(unused))]
	case k == 2 && len(names) > 1:
		i := r.IntN(len(names))
		names = slices.Delete(names, i, i+1)
	case len(unused) > 0:
		names = slices.Insert(names, r.IntN(len(names)+1), unused[r.IntN(len(unused))])
	}
	j.ItemNames = names
	return "item_names [" + strings.Join(names, " ") + "]"
}

// unitsOf lists the names of j's units: its items', or its own.
func unitsOf(j config.Job) []string {
	n := j.ItemCount()
	if n == 0 {
		return []string{j.Name}
	}
	out := make([]string, n)
	for i := range n {
		out[i] = config.UnitName(j.Name, j.Item(i))
	}
	return out
}

// triggerUnits are the units a manual trigger of j goes to: one item, or
// (one time in three) every item, as `trigger JOB` does.
func triggerUnits(j config.Job, r *rand.Rand) []string {
	us := unitsOf(j)
	if len(us) == 1 || r.IntN(3) == 0 {
		return us
	}
	return []string{us[r.IntN(len(us))]}
}
