package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shardcron/shardcron/internal/etcdembed"
	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// jobPageTick is the schedule of the job the page test operates.
const jobPageTick = 2 * time.Second

// jobPageJobs: tick runs every two seconds and prints, alongside its
// previous run if that is slow (a manual run is never skipped); its env
// holds a literal the page must not show.
const jobPageJobs = `jobs:
  - name: tick
    schedule: "*/2 * * * * *"
    concurrency: allow
    exec: {command: ["echo", "hello from tick"]}
    env: {LITERAL: "do-not-show-this"}
  - name: other
    schedule: "@hourly"
    exec: {command: ["true"]}
`

// jobPageView is what the job page shows, read from its DOM.
type jobPageView struct {
	Runs []struct {
		Tick   time.Time `json:"tick"`
		Status string    `json:"status"`
		Manual bool      `json:"manual"`
		Trace  string    `json:"trace"` // the trace id shown
		Link   string    `json:"link"`  // where it links
		Output string    `json:"output"`
	} `json:"runs"`
	Controls  bool   `json:"controls"` // shown, as the browser draws it
	Confirm   bool   `json:"confirm"`
	Suspended bool   `json:"suspended"`
	Outcome   string `json:"outcome"`
	OK        string `json:"ok"`
	Text      string `json:"text"`
	Mark      any    `json:"mark"`
}

const readJobPage = `(() => ({
  runs: [...document.querySelectorAll("#runs tbody tr[data-status]")].map((r) => ({tick: r.dataset.tick, status: r.dataset.status,
    manual: r.hasAttribute("data-manual"), trace: r.cells[7].textContent, link: r.cells[7].querySelector("a")?.getAttribute("href") ?? "", output: r.cells[8].textContent})),
  controls: document.getElementById("controls").checkVisibility(), confirm: document.getElementById("confirm").checkVisibility(),
  suspended: !!document.getElementById("suspended"), outcome: document.getElementById("outcome").textContent,
  ok: document.getElementById("outcome").dataset.ok ?? "", text: document.body.innerText, mark: window.__testMark ?? null,
}))()`

// TestJobPage opens a job's page from the dashboard's jobs table in
// Chromium and operates the job through it: its runs arrive with their
// trace ids linked; without a token there are no controls; with one, a
// confirmed trigger shows the manual run, a suspend shows no run for two
// ticks, and a resume shows runs again. All without a reload.
func TestJobPage(t *testing.T) {
	chromium := findChromium(t)
	etcd := etcdtest.StartProcess(t)
	dead, err := etcdembed.FreeAddr() // a collector that is not there: runs still get trace ids
	if err != nil {
		t.Fatal(err)
	}
	srv := startProcCmd(t, "n1", func(c *exec.Cmd) { c.Env = append(c.Env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+dead) },
		"server", "--cluster", "jobpage", "--node-id", "n1", "--etcd-endpoints", etcd.Endpoint(), "--http-addr", "127.0.0.1:0",
		"--jobs", writeFile(t, "jobs.yaml", jobPageJobs), "--shards", "8", "--trace-ui-url", "https://traces.example/t/{trace_id}?x=1")
	ctx := openBrowser(t, chromium, 3*time.Minute, "http://"+srv.HTTPAddr(30*time.Second)+"/")
	poll.MustEvery(t, procEvery, 30*time.Second, "the jobs table links tick's page", poll.True(func() bool {
		var n int
		return chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll('#jobs a[href="/jobs/tick"]').length`, &n)) == nil && n == 1
	}))
	// Clicked from script: the table is redrawn every few seconds, which
	// would take the node from under a mouse click.
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.querySelector('#jobs a[href="/jobs/tick"]').click()`, nil), chromedp.WaitVisible("#operate", chromedp.ByID),
		chromedp.Evaluate(`window.__testMark = "no reload"`, nil)); err != nil {
		t.Fatalf("open tick's page: %v", err)
	}
	var v jobPageView
	read := func() jobPageView {
		t.Helper()
		if err := chromedp.Run(ctx, chromedp.Evaluate(readJobPage, &v)); err != nil {
			t.Fatalf("read the page: %v", err)
		}
		if v.Mark != "no reload" {
			t.Fatalf("the page was reloaded (mark %v)", v.Mark)
		}
		return v
	}
	poll.MustEvery(t, procEvery, 30*time.Second, "tick's scheduled runs, traced and linked", poll.True(func() bool {
		p := read()
		return len(p.Runs) > 0 && p.Runs[0].Status == "succeeded" && p.Runs[0].Trace != "" && strings.Contains(p.Runs[0].Output, "hello from tick") &&
			p.Runs[0].Link == "https://traces.example/t/"+p.Runs[0].Trace+"?x=1"
	}))
	for _, want := range []string{`"name": "tick"`, "next fires", "skipped ticks"} {
		if !strings.Contains(v.Text, want) {
			t.Errorf("the page does not show %q:\n%s", want, v.Text)
		}
	}
	for _, leak := range []string{"do-not-show-this", "LITERAL", "echo"} {
		if strings.Contains(v.Text, leak) {
			t.Errorf("the page shows %q, from the job's target or environment", leak)
		}
	}
	if v.Controls {
		t.Fatal("the operator controls show without a token")
	}
	if err := chromedp.Run(ctx, chromedp.SendKeys("#token", "any-operate-token", chromedp.ByID), chromedp.Click("#usetoken", chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	poll.MustEvery(t, procEvery, 5*time.Second, "the controls, once a token is in", poll.True(func() bool { return read().Controls }))

	// A cancelled action does nothing; a confirmed trigger shows its run.
	act(t, ctx, "suspend", "#no")
	if p := read(); p.Confirm || p.Outcome != "suspend: cancelled" || p.Suspended {
		t.Fatalf("after cancel: confirm shown %v, outcome %q, suspended %v", p.Confirm, p.Outcome, p.Suspended)
	}
	act(t, ctx, "trigger", "#yes")
	poll.MustEvery(t, procEvery, 30*time.Second, "the manual run on the page", poll.True(func() bool {
		p := read()
		return p.OK == "true" && strings.HasPrefix(p.Outcome, "triggered: request ") && !p.Confirm && hasManualRun(p)
	}))

	// Suspended: no run for two ticks (and a page refresh).
	act(t, ctx, "suspend", "#yes")
	poll.MustEvery(t, procEvery, 10*time.Second, "the page shows tick suspended", poll.True(func() bool {
		p := read()
		return p.OK == "true" && p.Outcome == "tick suspended" && p.Suspended
	}))
	suspended := time.Now()
	// Ticks that come due meanwhile are recorded as skipped ("job
	// suspended"); none runs.
	poll.HoldsEvery(t, procEvery, 2*jobPageTick+2*time.Second, "no run of tick while suspended", func() error {
		if last := lastRun(read()); last.After(suspended) {
			return fmt.Errorf("a run of tick %v, after the suspend at %v", last, suspended)
		}
		return nil
	})

	// Resumed: runs again.
	act(t, ctx, "resume", "#yes")
	resumed := time.Now()
	poll.MustEvery(t, procEvery, 30*time.Second, "runs of tick after the resume", poll.True(func() bool {
		p := read()
		return p.OK == "true" && p.Outcome == "tick resumed" && !p.Suspended && lastRun(p).After(resumed)
	}))
	if err := chromedp.Run(ctx, chromedp.Click("#forget", chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	if read().Controls {
		t.Error("the controls still show once the token is forgotten")
	}
}

// act clicks the job page's button for action, then answer (#yes or #no)
// in the confirmation it asks for.
func act(t *testing.T, ctx context.Context, action, answer string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Click(`#controls [data-act="`+action+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByID), chromedp.Click(answer, chromedp.ByQuery)); err != nil {
		t.Fatalf("%s, %s: %v", action, answer, err)
	}
}

// lastRun is the tick of the newest run the page shows, skipped ticks
// aside; zero if none.
func lastRun(p jobPageView) time.Time {
	for _, r := range p.Runs {
		if r.Status != "skipped" {
			return r.Tick
		}
	}
	return time.Time{}
}

func hasManualRun(p jobPageView) bool {
	for _, r := range p.Runs {
		if r.Manual && r.Status == "succeeded" {
			return true
		}
	}
	return false
}
