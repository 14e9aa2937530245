package main

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/shardcron/shardcron/internal/poll"
)

// narrowWidth is the window the page must fit without scrolling sideways.
const narrowWidth = 1400

// fitsWindow checks, in the open page ctx, that a 1,400 px window holds the
// page with the longest names the contract allows (a node id of 253
// characters, a job name of 128): they are clipped with an ellipsis and
// shown whole in their title.
func fitsWindow(t *testing.T, ctx context.Context) {
	t.Helper()
	var got struct {
		Scroll, Inner  int
		Clipped        bool
		Title          string
		JobClipped     bool
		TimelineInView bool
	}
	err := chromedp.Run(ctx,
		emulation.SetDeviceMetricsOverride(narrowWidth, 1000, 1, false),
		chromedp.Evaluate(`(() => {
  const long = "node-" + "x".repeat(248), job = "job-" + "y".repeat(124);
  state.members.push(Object.assign({}, state.members[0], {node: long}));
  state.node = long;
  render();
  changes.push({kind: "joined", shard: -1, node: long, at: new Date().toISOString()});
  renderTimeline();
  jobRows = [{name: job, shard: 0, schedule: "@every 1s", last_runs: []}];
  renderJobs();
  const m = document.querySelector("#members tr[data-node='" + long + "'] .clip");
  const j = document.querySelector("#jobs tbody .clip");
  const out = {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
    clipped: m.scrollWidth > m.clientWidth, title: m.title, jobclipped: j.scrollWidth > j.clientWidth && j.title === job};
  changes.pop(); renderTimeline();
  return out;
})()`, &got))
	if err != nil {
		t.Fatalf("long names at %d px: %v", narrowWidth, err)
	}
	if got.Inner != narrowWidth || got.Scroll > got.Inner {
		t.Errorf("at a %d px window (inner %d) the page is %d px wide: it must fit", narrowWidth, got.Inner, got.Scroll)
	}
	if !got.Clipped || len(got.Title) != 253 || !got.JobClipped {
		t.Errorf("long names are not clipped with their whole name in the title: node clipped %v (title %d chars), job clipped %v", got.Clipped, len(got.Title), got.JobClipped)
	}
	if err := chromedp.Run(ctx, emulation.ClearDeviceMetricsOverride()); err != nil {
		t.Fatal(err)
	}
}

// showsLoading opens the page in a new tab of ctx's browser with the jobs
// API held: the jobs table says it is loading (not an empty table), then
// shows the jobs once the API answers.
func showsLoading(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	defer cancel()
	paused := make(chan fetch.RequestID, 16)
	chromedp.ListenTarget(tab, func(ev any) {
		if e, ok := ev.(*fetch.EventRequestPaused); ok {
			paused <- e.RequestID
		}
	})
	held := []*fetch.RequestPattern{{URLPattern: "*/api/v1/jobs*", RequestStage: fetch.RequestStageRequest}}
	if err := chromedp.Run(tab, fetch.Enable().WithPatterns(held), chromedp.Navigate("http://"+addr+"/")); err != nil {
		t.Fatalf("open the page with the jobs API held: %v", err)
	}
	var id fetch.RequestID
	select {
	case id = <-paused:
	case <-time.After(10 * time.Second):
		t.Fatal("the page never asked for /api/v1/jobs")
	}
	jobsTable := func() (busy, text string) {
		t.Helper()
		var v []string
		if err := chromedp.Run(tab, chromedp.Evaluate(`[document.getElementById("jobs").getAttribute("aria-busy"), document.querySelector("#jobs tbody").textContent]`, &v)); err != nil {
			t.Fatal(err)
		}
		return v[0], v[1]
	}
	if busy, text := jobsTable(); busy != "true" || text != "loading jobs…" {
		t.Errorf("before the first jobs page: aria-busy %q, table %q; want a loading state", busy, text)
	}
	if err := chromedp.Run(tab, fetch.ContinueRequest(id), fetch.Disable()); err != nil {
		t.Fatal(err)
	}
	for len(paused) > 0 { // asked again meanwhile: let those through too
		_ = chromedp.Run(tab, fetch.ContinueRequest(<-paused))
	}
	poll.MustEvery(t, procEvery, 10*time.Second, "the jobs table fills once the API answers", poll.True(func() bool {
		busy, text := jobsTable()
		return busy == "false" && text != "loading jobs…" && len(text) > 0
	}))
}
