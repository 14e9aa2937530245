package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/cronspec"
)

// TestValidateSchedules: validate -o json lists each job's schedule with its
// H terms resolved for its name and its next fire times after --from; a
// suspended job lists none; the table output stays one line; bad --next
// and --from are usage errors.
func TestValidateSchedules(t *testing.T) {
	besideOthers(t)
	file := "jobs:\n" +
		"  - {name: spread-a, schedule: \"H H * * * *\", exec: {command: [\"true\"]}}\n" +
		"  - {name: spread-b, schedule: \"H H * * * *\", timezone: Europe/Berlin, exec: {command: [\"true\"]}}\n" +
		"  - {name: steps, schedule: \"H/15 * * * *\", exec: {command: [\"true\"]}}\n" +
		"  - {name: paused, schedule: \"0 3 * * *\", suspend: true, exec: {command: [\"true\"]}}\n"
	from := "2026-03-08T00:00:00Z"
	out, stderr, code := runCLIStdin(t, file, "validate", "-f", "-", "-o", "json", "--from", from, "--next", "4")
	var v validateResult
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Schedules) != 4 {
		t.Fatalf("validate -o json: exit %d, %s %s", code, out, stderr)
	}
	at, _ := time.Parse(time.RFC3339, from)
	for _, s := range v.Schedules[:3] {
		want, _ := cronspec.Expand(s.Schedule, s.Name)
		if s.Resolved != want || strings.Contains(s.Resolved, "H") {
			t.Errorf("%s: resolved %q, want %q", s.Name, s.Resolved, want)
		}
		sch, err := cronspec.ParseJob(s.Schedule, s.Timezone, s.Name)
		if err != nil {
			t.Fatal(err)
		}
		wantNext := cronspec.NextN(sch, at, 4)
		if len(s.Next) != 4 {
			t.Fatalf("%s: next %v, want 4 times", s.Name, s.Next)
		}
		for i := range wantNext {
			if !s.Next[i].Equal(wantNext[i]) {
				t.Errorf("%s: next[%d] = %v, want %v", s.Name, i, s.Next[i], wantNext[i])
			}
		}
	}
	if v.Schedules[0].Resolved == v.Schedules[1].Resolved {
		t.Errorf("two names resolved H H to the same %q", v.Schedules[0].Resolved)
	}
	if p := v.Schedules[3]; !p.Suspended || p.Next != nil || p.Resolved != "" {
		t.Errorf("suspended job listed as %+v", p)
	}
	if out, _, code = runCLIStdin(t, file, "validate", "-f", "-"); code != 0 || out != "<stdin>: 4 jobs, valid\n" {
		t.Errorf("validate (table): exit %d, %q", code, out)
	}
	for _, bad := range [][]string{{"--next", "-1"}, {"--next", "101"}, {"--from", "tomorrow"}} {
		args := append([]string{"validate", "-f", "-", "-o", "json"}, bad...)
		if _, stderr, code = runCLIStdin(t, file, args...); code != 2 || !strings.Contains(stderr, bad[0]) {
			t.Errorf("validate %v: exit %d, %s", bad, code, stderr)
		}
	}
	// A bad H term names the file, line and field.
	bad := "jobs:\n  - {name: x, schedule: \"H(9-5) * * * *\", exec: {command: [\"true\"]}}\n"
	if _, stderr, code = runCLIStdin(t, bad, "validate", "-f", "-"); code == 0 || !strings.Contains(stderr, `<stdin>:2: job "x": field "schedule"`) || !strings.Contains(stderr, "minute field") {
		t.Errorf("bad H: exit %d, %s", code, stderr)
	}
}

// TestValidateShapedSchedules: validate -o json lists a jittered job's
// fire times (each tick plus its offset, as every replica computes it), a
// one-shot's instant, max_runs counted from --from, and marks jobs with no
// fire left as finished; bad values name file, line and field.
func TestValidateShapedSchedules(t *testing.T) {
	besideOthers(t)
	file := "jobs:\n" +
		"  - {name: spread, schedule: \"*/30 * * * * *\", jitter: 20s, exec: {command: [\"true\"]}}\n" +
		"  - {name: once, at: 2026-03-08T00:05:00Z, exec: {command: [\"true\"]}}\n" +
		"  - {name: twice, schedule: \"@hourly\", max_runs: 2, exec: {command: [\"true\"]}}\n" +
		"  - {name: ended, schedule: \"@hourly\", end_at: 2026-01-01T00:00:00Z, exec: {command: [\"true\"]}}\n" +
		"  - {name: gone, at: 2025-01-01T00:00:00Z, exec: {command: [\"true\"]}}\n"
	from := "2026-03-08T00:00:00Z"
	out, stderr, code := runCLIStdin(t, file, "validate", "-f", "-", "-o", "json", "--from", from, "--next", "4")
	var v validateResult
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Schedules) != 5 {
		t.Fatalf("validate -o json: exit %d, %s %s", code, out, stderr)
	}
	at, _ := time.Parse(time.RFC3339, from)
	base, _ := cronspec.Parse("*/30 * * * * *", "UTC")
	s := v.Schedules[0]
	if s.Jitter != "20s" || len(s.Next) != 4 {
		t.Fatalf("spread: %+v", s)
	}
	for i, tick := range cronspec.NextN(base, at, 4) {
		if want := tick.Add(cronspec.JitterOffset("spread", tick, 20*time.Second)); !s.Next[i].Equal(want) {
			t.Errorf("spread: next[%d] = %v, want %v", i, s.Next[i], want)
		}
	}
	if s := v.Schedules[1]; len(s.Next) != 1 || !s.Next[0].Equal(at.Add(5*time.Minute)) || s.At.IsZero() {
		t.Errorf("once: %+v", s)
	}
	if s := v.Schedules[2]; len(s.Next) != 2 || s.Finished {
		t.Errorf("twice: %+v, want 2 fires", s)
	}
	for _, s := range v.Schedules[3:] {
		if !s.Finished || len(s.Next) != 0 {
			t.Errorf("%s: %+v, want finished", s.Name, s)
		}
	}
	bad := "jobs:\n  - name: x\n    schedule: \"@hourly\"\n    jitter: 2h\n    exec: {command: [\"true\"]}\n"
	if _, stderr, code = runCLIStdin(t, bad, "validate", "-f", "-"); code == 0 || !strings.Contains(stderr, `<stdin>:4: job "x": field "jitter"`) {
		t.Errorf("jitter past the period: exit %d, %s", code, stderr)
	}
}

// TestValidateItemSchedules: validate -o json gives a sharded job's item
// count; with a jitter each item's fire times are its own (hashed from
// the item's unit name), every one within [tick, tick+jitter).
func TestValidateItemSchedules(t *testing.T) {
	besideOthers(t)
	file := "jobs:\n" +
		"  - {name: split, schedule: \"*/30 * * * * *\", items: 3, exec: {command: [\"true\"]}}\n" +
		"  - {name: tenants, schedule: \"*/30 * * * * *\", item_names: [acme, globex], jitter: 20s, exec: {command: [\"true\"]}}\n"
	from := "2026-03-08T00:00:00Z"
	out, stderr, code := runCLIStdin(t, file, "validate", "-f", "-", "-o", "json", "--from", from, "--next", "3")
	var v validateResult
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Schedules) != 2 {
		t.Fatalf("validate -o json: exit %d, %s %s", code, out, stderr)
	}
	if s := v.Schedules[0]; s.Items != 3 || len(s.Next) != 3 || len(s.ItemsNext) != 0 {
		t.Errorf("split: %+v; want 3 items sharing 3 next fires", s)
	}
	at, _ := time.Parse(time.RFC3339, from)
	base, _ := cronspec.Parse("*/30 * * * * *", "UTC")
	s := v.Schedules[1]
	if s.Items != 2 || len(s.Next) != 0 || len(s.ItemsNext) != 2 || s.ItemsNext[1].Item != "globex" {
		t.Fatalf("tenants: %+v; want each item's own fires", s)
	}
	for _, in := range s.ItemsNext {
		for i, tick := range cronspec.NextN(base, at, 3) {
			if want := tick.Add(cronspec.JitterOffset("tenants:"+in.Item, tick, 20*time.Second)); len(in.Next) != 3 || !in.Next[i].Equal(want) {
				t.Errorf("tenants item %s: next %v, want [%d] = %v", in.Item, in.Next, i, want)
			}
		}
	}
}
