package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/poll"
)

// The browser test opens the dashboard of one of three `shardcron server`
// processes in Debian's Chromium, through chromedp, and watches it follow
// ownership without a reload: every shard shows an owner, a SIGKILLed
// replica's shards show their new owners within TTL + 3 s, and a SIGTERMed
// replica's handoff shows within a second.
//
// Chromium is found on PATH (chromium, chromium-browser, google-chrome) or
// at $SHARDCRON_CHROMIUM. Without one the test skips, except under CI=true,
// where it fails: CI installs it (.ci/run).
//
// SHARDCRON_SCREENSHOT=path saves the page as PNG there (docs/dashboard.png
// is made this way); otherwise it goes to the test's temp dir.

const (
	browserTTL = 3 * time.Second
	// handoffShownSlack bounds SIGTERM to the page showing the handoff: the
	// one-second target plus 2 s of slack for a loaded machine.
	handoffShownSlack = 3*time.Second - time.Millisecond
	browserShards     = 128
	browserCluster    = "browser"
)

func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SHARDCRON_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium on PATH: CI must install it (apt-get install -y chromium)")
	}
	t.Skip("no Chromium on PATH (apt-get install chromium); under CI=true this fails")
	return ""
}

// openBrowser starts Chromium, opens url in it and returns the tab's
// context, which ends after timeout; the browser stops when the test ends.
func openBrowser(t *testing.T, chromium string, timeout time.Duration, url string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1440, 1000),
		chromedp.Flag("disable-dev-shm-usage", true), // containers have a small /dev/shm
		chromedp.UserDataDir(t.TempDir()))...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancelCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelTimeout)
	// The browser lives as long as the context of the first Run: ctx.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	openCtx, cancelOpen := context.WithTimeout(ctx, 30*time.Second)
	defer cancelOpen()
	if err := chromedp.Run(openCtx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return ctx
}

// pageView is what the page shows, read from its DOM.
type pageView struct {
	Owners  map[string]int `json:"owners"` // node -> cells it colours
	Unowned int            `json:"unowned"`
	Header  string         `json:"header"` // the "without an owner" count shown
	Live    string         `json:"live"`
	Mark    any            `json:"mark"` // set by the test; a reload clears it
}

const readPage = `(() => {
  const owners = {}; let unowned = 0;
  for (const c of document.querySelectorAll("#grid .cell")) {
    if (c.dataset.owner) owners[c.dataset.owner] = (owners[c.dataset.owner] || 0) + 1; else unowned++;
  }
  return {owners, unowned, header: document.getElementById("unowned").textContent,
    live: document.getElementById("live").dataset.live, mark: window.__testMark ?? null};
})()`

func TestDashboardInBrowser(t *testing.T) {
	chromium := findChromium(t)
	etcd := etcdtest.StartProcess(t)
	probe := newOwnershipProbe(t, etcd.Endpoint(), browserCluster)
	jobs := writeFile(t, "jobs.yaml", browserJobs)
	procs := map[string]*proc{}
	var addr string
	for _, n := range []string{"n1", "n2", "n3"} {
		procs[n] = startProc(t, n, "server", "--cluster", browserCluster, "--node-id", n,
			"--etcd-endpoints", etcd.Endpoint(), "--http-addr", "127.0.0.1:0", "--jobs", jobs,
			"--lease-ttl", browserTTL.String(), "--shards", fmt.Sprint(browserShards), "--drain-timeout", "2s")
		if n == "n1" {
			addr = procs[n].HTTPAddr(30 * time.Second)
		}
	}
	poll.MustEvery(t, procEvery, 45*time.Second, "3 nodes own every shard", poll.True(func() bool {
		return probe.allOwnedBy(browserShards, "n1", "n2", "n3")
	}))

	ctx := openBrowser(t, chromium, 3*time.Minute, "http://"+addr+"/")
	var v pageView
	read := func() pageView {
		t.Helper()
		var got pageView
		if err := chromedp.Run(ctx, chromedp.Evaluate(readPage, &got)); err != nil {
			t.Fatalf("read the page: %v", err)
		}
		v = got
		return got
	}
	poll.MustEvery(t, procEvery, 15*time.Second, "the page shows every shard owned, by all three", poll.True(func() bool {
		p := read()
		return p.Unowned == 0 && len(p.Owners) == 3 && p.Header == "0" && p.Live == "true"
	}))
	fitsWindow(t, ctx)
	showsLoading(t, ctx, addr)
	// The page agrees with etcd, shard by shard.
	var cellOwners map[string]string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`Object.fromEntries([...document.querySelectorAll("#grid .cell")].map(c => [c.dataset.shard, c.dataset.owner]))`, &cellOwners)); err != nil {
		t.Fatal(err)
	}
	for s, owner := range probe.owners() {
		if cellOwners[fmt.Sprint(s)] != owner {
			t.Errorf("shard %d: the page says %q, etcd %q", s, cellOwners[fmt.Sprint(s)], owner)
		}
	}
	// The jobs table: searched by name through the paged jobs API, with
	// each job's schedule.
	if err := chromedp.Run(ctx, chromedp.SendKeys("#search", "tenant", chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	poll.MustEvery(t, procEvery, 10*time.Second, "the search keeps the two tenant jobs", poll.True(func() bool {
		var rows []string
		err := chromedp.Run(ctx, chromedp.Evaluate(`[...document.querySelectorAll("#jobs tbody tr")].map(r => r.cells[0].textContent + " " + r.cells[3].textContent)`, &rows))
		return err == nil && len(rows) == 2 && strings.HasPrefix(rows[0], "tenant-a.sync */3 * * * * *") && strings.HasPrefix(rows[1], "tenant-b.sync @every 4s")
	}))
	if err := chromedp.Run(ctx, chromedp.Evaluate(`window.__testMark = "no reload"`, nil)); err != nil {
		t.Fatal(err)
	}
	noReload := func() {
		t.Helper()
		if v.Mark != "no reload" {
			t.Fatalf("the page was reloaded (mark %v)", v.Mark)
		}
	}

	// SIGKILL n3: its lease expires after the TTL; the page shows its shards
	// taken over within TTL + 3 s, without a reload.
	procs["n3"].signal(syscall.SIGKILL)
	killed := time.Now()
	poll.MustEvery(t, procEvery, browserTTL+3*time.Second, "the page shows n3's shards taken over", poll.True(func() bool {
		p := read()
		return p.Unowned == 0 && p.Owners["n3"] == 0 && len(p.Owners) == 2
	}))
	noReload()
	screenshot(t, ctx) // two owners, and the loss and takeover in the timeline
	t.Logf("SIGKILL n3 -> the page shows the takeover: %v (TTL %v)", time.Since(killed).Round(time.Millisecond), browserTTL)

	// SIGTERM n2: it drains (nothing runs long) and hands over; the page
	// shows n1 owning everything within a second.
	poll.MustEvery(t, procEvery, 15*time.Second, "settled on n1 and n2", poll.True(func() bool { return probe.allOwnedBy(browserShards, "n1", "n2") }))
	procs["n2"].signal(syscall.SIGTERM)
	termed := time.Now()
	poll.MustEvery(t, procEvery, 10*time.Second, "etcd shows n2's shards handed to n1", poll.True(func() bool { return probe.allOwnedBy(browserShards, "n1") }))
	inEtcd := time.Since(termed)
	poll.MustEvery(t, procEvery, 10*time.Second, "the page shows the handoff", poll.True(func() bool {
		p := read()
		return p.Unowned == 0 && p.Owners["n1"] == browserShards
	}))
	onPage := time.Since(termed)

	noReload()
	t.Logf("SIGTERM n2 -> handoff in etcd %v, on the page %v", inEtcd.Round(time.Millisecond), onPage.Round(time.Millisecond))
	// The target is within a second (the figure logged above, on a quiet
	// machine 0.6-0.8 s); asserted with 2 s of slack, stated here, because a
	// loaded 2-core CI machine delays processes, not the protocol. The bound
	// is below the TTL, so a handoff that fell back to a lease's expiry
	// still fails.
	if onPage > handoffShownSlack {
		t.Errorf("the handoff showed on the page %v after SIGTERM (in etcd after %v), want within a second (asserted: %v)", onPage, inEtcd, handoffShownSlack)
	}
	if code, err := procs["n2"].Wait(10 * time.Second); err != nil || code != 0 {
		t.Errorf("n2 after SIGTERM: exit %d, %v", code, err)
	}

	// The timeline recorded the loss and the handoff with their causes.
	var kinds map[string]bool
	if err := chromedp.Run(ctx, chromedp.Evaluate(`Object.fromEntries(changes.map(c => [c.kind + ":" + (c.cause || ""), true]))`, &kinds)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"lost:lease ended", "left:lease ended", "acquired:takeover", "left:leave", "released:", "acquired:handoff"} {
		if !kinds[want] {
			t.Errorf("the timeline lacks %q: %v", want, keys(kinds))
		}
	}
}

// screenshot saves the page: at $SHARDCRON_SCREENSHOT, or in the temp dir.
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	path := os.Getenv("SHARDCRON_SCREENSHOT")
	if path == "" {
		path = filepath.Join(t.TempDir(), "dashboard.png")
	}
	// Moved shards flash for a moment; take the picture once they are still.
	// Under load a takeover moves shards for several seconds and each move
	// flashes anew (CI once saw them go on past 10 s): the bound is generous,
	// since only the picture waits on it, no protocol bound.
	poll.MustEvery(t, procEvery, 30*time.Second, "the page's animations end", poll.True(func() bool {
		var n int
		return chromedp.Run(ctx, chromedp.Evaluate(`document.getAnimations().length`, &n)) == nil && n == 0
	}))
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(png))
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// browserJobs keep the jobs table busy: runs succeed and fail. None runs
// for long, so a drain takes milliseconds.
const browserJobs = `jobs:
  - name: heartbeat
    schedule: "*/2 * * * * *"
    exec: {command: ["true"]}
  - name: invoice-sweep
    schedule: "*/5 * * * * *"
    exec: {command: ["true"]}
  - name: report.nightly
    schedule: "0 3 * * *"
    timezone: Europe/Berlin
    exec: {command: ["true"]}
  - name: tenant-a.sync
    schedule: "*/3 * * * * *"
    exec: {command: ["false"]}
  - name: tenant-b.sync
    schedule: "@every 4s"
    exec: {command: ["true"]}
`
