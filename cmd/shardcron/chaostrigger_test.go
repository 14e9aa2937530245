package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Manual runs under the nemesis: before a fault it may trigger a few jobs
// (shardcron trigger, straight to etcd, as an operator does), so that the
// fault lands while their manual ticks wait, are claimed or run. The
// checker holds them to the contract as it holds scheduled ticks: every
// trigger the CLI accepted ran (or a log decided it), none ran twice
// unmarked, and none started past its job's starting deadline, which
// counts from the request. A trigger of a sharded job runs every item
// under one id: each item's manual tick is held to that.

// chaosTrigger is a trigger the CLI accepted, with the items it wrote a
// request for (none for a job without items).
type chaosTrigger struct {
	job, id string
	items   []string
}

// units are the units the trigger runs, as the logs name them.
func (tr chaosTrigger) units() []string {
	if len(tr.items) == 0 {
		return []string{tr.job}
	}
	us := make([]string, len(tr.items))
	for i, it := range tr.items {
		us[i] = unitOf(tr.job, it)
	}
	return us
}

// trigger asks for one to three manual runs of jobs (not chaosSuspended).
// A call that fails may still have written its requests: it is counted as
// unknown, and its runs, if any, are still held to "never twice unmarked".
func (c *chaosRun) trigger() {
	var names []string
	for _, j := range chaosJobs {
		if j.name != chaosSuspended {
			names = append(names, j.name)
		}
	}
	for range 1 + c.rng.IntN(3) {
		job := names[c.rng.IntN(len(names))]
		var res struct {
			ID    string `json:"id"`
			Items []struct {
				Item string `json:"item"`
			} `json:"items"`
		}
		err := c.cli(&res, "trigger", job, "--by", "nemesis")
		if err != nil || res.ID == "" {
			c.did.triggersUnknown++
			c.note("trigger %s: outcome unknown (%v)", job, err)
			continue
		}
		tr := chaosTrigger{job: job, id: res.ID}
		for _, it := range res.Items {
			tr.items = append(tr.items, it.Item)
		}
		c.did.triggers = append(c.did.triggers, tr)
		c.note("trigger %s (%s)", job, res.ID)
	}
}

// cli runs a shardcron command against the cluster's etcd, as an operator
// does (not through a replica's proxy), and decodes its -o json answer
// into res.
func (c *chaosRun) cli(res any, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args = append(args, "--etcd-endpoints", c.etcd.Endpoint(), "--cluster", chaosCluster, "--timeout", "5s", "-o", "json")
	out, err := exec.CommandContext(ctx, c.bin, args...).Output()
	if err != nil {
		return err
	}
	return json.Unmarshal(out, res)
}

// manualReport is the checker's account of manual runs: of triggers, and
// of their manual ticks (one per item).
type manualReport struct {
	accepted, unknown, ticks, ran, decided int
	missed, unmarked, late                 []string
}

var (
	receivedLine = regexp.MustCompile(`msg="trigger received"`)
	lineTrigger  = attrValue("trigger")
)

// checkManual finds each accepted trigger's tick in a "trigger received"
// line (every owner computes the same one), then the tick in the ledger or
// decided in a log (skips, ends: decisionsIn's). Every manual tick in the
// ledger, an unknown trigger's included, may run once unmarked.
func checkManual(triggers []chaosTrigger, unknown int, fires []fire, lines []string, skips, ends map[chaosUnit][]string) manualReport {
	r := manualReport{accepted: len(triggers), unknown: unknown}
	deadline := chaosUnits()            // a job without items is its own unit
	tickOf := map[[2]string]time.Time{} // by trigger id and unit
	for _, l := range lines {
		if receivedLine.MatchString(l) {
			if tick, err := time.Parse(time.RFC3339Nano, attr(skipTick, l)); err == nil {
				tickOf[[2]string{attr(lineTrigger, l), attr(skipJob, l)}] = tick.UTC()
			}
		}
	}
	got := map[chaosUnit][]fire{}
	for _, f := range fires {
		if f.Accepted && f.Tick.Nanosecond() != 0 { // a manual tick: never a whole second
			u := chaosUnit{unitOf(f.Job, f.Item), f.Tick.UTC()}
			got[u] = append(got[u], f)
		}
	}
	for _, u := range slices.SortedFunc(maps.Keys(got), func(a, b chaosUnit) int { return a.tick.Compare(b.tick) }) {
		fs := got[u]
		for _, d := range fs[1:] {
			if !d.Rerun {
				r.unmarked = append(r.unmarked, fmt.Sprintf("manual %s@%s (nodes %s then %s, tokens %d then %d)",
					u.unit, u.tick.Format("15:04:05.000000"), fs[0].Node, d.Node, fs[0].Token, d.Token))
			}
		}
		for _, f := range fs {
			if late := f.At.Sub(u.tick); late > deadline[u.unit]+chaosLateSlack {
				r.late = append(r.late, fmt.Sprintf("manual %s@%s reached the ledger %v after its request (starting deadline %v, rerun=%v, node %s)",
					u.unit, u.tick.Format("15:04:05.000000"), late.Round(time.Millisecond), deadline[u.unit], f.Rerun, f.Node))
			}
		}
	}
	for _, tr := range triggers {
		for _, unit := range tr.units() {
			r.ticks++
			tick, ok := tickOf[[2]string{tr.id, unit}]
			if !ok {
				r.missed = append(r.missed, fmt.Sprintf("trigger %s of %s: no replica received it", tr.id, unit))
				continue
			}
			u := chaosUnit{unit, tick}
			switch {
			case len(got[u]) > 0:
				r.ran++
			case len(skips[u]) > 0 || len(ends[u]) > 0:
				r.decided++
			default:
				r.missed = append(r.missed, fmt.Sprintf("trigger %s of %s (tick %s): neither in the ledger nor decided in a log",
					tr.id, unit, tick.Format("15:04:05.000000")))
			}
		}
	}
	return r
}

func (r manualReport) String() string {
	return fmt.Sprintf("manual runs: %d triggers accepted (%d more of unknown outcome), %d manual ticks (one an item): %d ran, %d decided without reaching the ledger, %d missed; %d repeats unmarked; %d reached the ledger late",
		r.accepted, r.unknown, r.ticks, r.ran, r.decided, len(r.missed), len(r.unmarked), len(r.late))
}

func (r manualReport) problems() []string {
	first := func(s []string) string { return strings.Join(s[:min(20, len(s))], "; ") }
	var out []string
	if len(r.missed) > 0 {
		out = append(out, fmt.Sprintf("%d triggers neither ran nor were decided in a log: %s", len(r.missed), first(r.missed)))
	}
	if len(r.unmarked) > 0 {
		out = append(out, fmt.Sprintf("%d manual ticks ran twice, the repeat not marked: %s", len(r.unmarked), first(r.unmarked)))
	}
	if len(r.late) > 0 {
		out = append(out, fmt.Sprintf("%d manual runs started past their starting deadline: %s", len(r.late), first(r.late)))
	}
	return out
}

// The manual checker finds what it is there for: a trigger nobody
// received, one received and never decided, a repeat unmarked and a run
// past its deadline; a marked re-run, a skip and a run are fine.
func TestCheckManualFindsWhatTheContractForbids(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, "2026-12-07T13:00:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	received := func(job, id, tick string) string {
		return fmt.Sprintf(`time=2026-12-07T13:00:00.000Z level=INFO msg="trigger received" node=c1 shard=1 token=5 job=%s trigger=%s tick=%s`, job, id, at(tick).Format(time.RFC3339Nano))
	}
	// A sharded job's trigger: item 0 ran, item 1 was received and never
	// decided, item 2 never received.
	itemLines := []string{received("chaos-items:0", "items", "06.000006"), received("chaos-items:1", "items", "06.000006")}
	skipped := fmt.Sprintf(`time=2026-12-07T13:00:03.000Z level=INFO msg="tick skipped" node=c1 shard=1 token=5 job=chaos-forbid-all tick=%s outcome=skipped count=1 detail="concurrency forbid: previous run still active" trigger=skip`, at("02.000002").Format(time.RFC3339Nano))
	// A skip by forbid is logged once its write landed: it decides the
	// trigger though the line comes after a successor acquired the shard.
	acquired := `time=2026-12-07T13:00:02.500Z level=INFO msg=acquired node=c2 shard=1 token=6`
	lines := []string{received("chaos-allow-all", "ran", "01.000001"), received("chaos-forbid-all", "skip", "02.000002"), acquired, skipped,
		received("chaos-allow-all", "twice", "03.000003"), received("chaos-allow-late", "late", "04.000004"),
		received("chaos-allow-all", "undecided", "05.000005")}
	lines = append(lines, itemLines...)
	ran := func(job, tick string, rerun bool, after time.Duration) fire {
		return fire{Job: job, Tick: at(tick), Node: "c1", Token: 5, Rerun: rerun, Accepted: true, At: at(tick).Add(after)}
	}
	fires := []fire{ran("chaos-allow-all", "01.000001", false, 10*time.Millisecond), ran("chaos-allow-all", "01.000001", true, time.Second),
		ran("chaos-allow-all", "03.000003", false, 0), ran("chaos-allow-all", "03.000003", false, time.Second),
		ran("chaos-allow-late", "04.000004", false, 3*time.Second+chaosLateSlack+time.Millisecond)}
	item0 := ran("chaos-items", "06.000006", false, 0)
	item0.Item = "0"
	fires = append(fires, item0)
	var triggers []chaosTrigger
	for _, tr := range [][2]string{{"chaos-allow-all", "ran"}, {"chaos-forbid-all", "skip"}, {"chaos-allow-all", "twice"},
		{"chaos-allow-late", "late"}, {"chaos-allow-all", "undecided"}, {"chaos-allow-all", "lost"}} {
		triggers = append(triggers, chaosTrigger{job: tr[0], id: tr[1]})
	}
	triggers = append(triggers, chaosTrigger{job: "chaos-items", id: "items", items: []string{"0", "1", "2"}})
	skips, ends, _ := decisionsIn(lines)
	r := checkManual(triggers, 1, fires, lines, skips, ends)
	if r.accepted != 7 || r.unknown != 1 || r.ticks != 9 || r.ran != 4 || r.decided != 1 || len(r.missed) != 4 || len(r.unmarked) != 1 || len(r.late) != 1 {
		t.Fatalf("%v\nmissed %q\nunmarked %q\nlate %q", r, r.missed, r.unmarked, r.late)
	}
	if !strings.Contains(r.missed[0], "undecided") || !strings.Contains(r.missed[1], "lost") ||
		!strings.Contains(r.missed[2], "items of chaos-items:1 (tick") || !strings.Contains(r.missed[3], "items of chaos-items:2: no replica") ||
		!strings.Contains(r.unmarked[0], "chaos-allow-all@13:00:03.000003") || !strings.Contains(r.late[0], "chaos-allow-late") {
		t.Errorf("missed %q, unmarked %q, late %q", r.missed, r.unmarked, r.late)
	}
}
