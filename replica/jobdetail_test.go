package replica

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/dashboard"
	"github.com/shardcron/shardcron/scheduler"
)

// TestJobDetail: a job's detail carries its definition without the target
// and environment (no URL, header, body, command or env value, literal or
// reference), its kind, and its next fires in order; a suspended job has
// none.
func TestJobDetail(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	jobs := map[string]*config.Job{
		"hook": {Name: "hook", Schedule: "@hourly", Since: since, Timeout: config.Duration(time.Minute),
			HTTP: &config.HTTPTarget{URL: "https://${SHARDCRON_JOB_HOST}/hook?key=literal-url-secret",
				Headers: map[string]string{"Authorization": "Bearer literal-header-secret"}, Body: "literal-body-secret"}},
		"cmd": {Name: "cmd", Schedule: "@hourly", Since: since, Suspend: true,
			Exec: &config.ExecTarget{Command: []string{"/bin/backup", "--password=literal-arg-secret"}},
			Env:  map[string]string{"TOKEN": "${SHARDCRON_JOB_TOKEN}", "KEY": "literal-env-secret"}},
	}
	next := since.Add(time.Hour)
	infos := []scheduler.JobInfo{{Name: "hook", Next: next}, {Name: "cmd", Suspended: true}}
	rows, _, _ := selectJobs(infos, jobs, nil, dashboard.JobsQuery{Limit: 10, Shard: -1})
	for _, row := range rows {
		d := newJobDetail(row, jobs[row.Name])
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, leak := range []string{"secret", "SHARDCRON_JOB_", `"url"`, `"headers"`, `"env"`, `"command"`, `"http":`, `"exec":`} {
			if strings.Contains(string(b), leak) {
				t.Errorf("%s: the detail shows %s: %s", row.Name, leak, b)
			}
		}
		if jobs[row.Name].HTTP == nil && jobs[row.Name].Exec == nil {
			t.Errorf("%s: newJobDetail changed the job set's own job", row.Name)
		}
		switch row.Name {
		case "hook":
			want := []time.Time{next, next.Add(time.Hour), next.Add(2 * time.Hour), next.Add(3 * time.Hour), next.Add(4 * time.Hour)}
			if d.Kind != "http" || len(d.NextFires) != NextFiresShown || !d.NextFires[0].Equal(want[0]) || !d.NextFires[4].Equal(want[4]) {
				t.Errorf("hook: kind %s, next fires %v, want http and %v", d.Kind, d.NextFires, want)
			}
		case "cmd":
			if d.Kind != "exec" || len(d.NextFires) != 0 || !d.Definition.Suspend {
				t.Errorf("cmd: kind %s, next fires %v, suspend %v; want exec, none, true", d.Kind, d.NextFires, d.Definition.Suspend)
			}
			// An override holds it too: the file's suspend stays, with its
			// instant; without the file's, the override's goes.
			d.Definition.SuspendedAt = since
			held := d
			held.asApplied(map[string]bool{"cmd": true})
			if !held.Definition.Suspend || !held.Definition.SuspendedAt.Equal(since) {
				t.Errorf("cmd held by the file and an override: suspend %v at %v, want true at %v", held.Definition.Suspend, held.Definition.SuspendedAt, since)
			}
			d.asApplied(map[string]bool{"cmd": false})
			if d.Definition.Suspend || !d.Definition.SuspendedAt.IsZero() {
				t.Errorf("cmd held by an override alone: suspend %v at %v, want false, none", d.Definition.Suspend, d.Definition.SuspendedAt)
			}
		}
	}
}
