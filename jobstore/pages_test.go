package jobstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shardcron/shardcron/internal/etcdtest"
	"github.com/shardcron/shardcron/internal/keyspace"
)

// pageKeys lists the stored page keys of every version.
func pageKeys(t testing.TB, cli *clientv3.Client, ks keyspace.Space) []string {
	t.Helper()
	var out []string
	for _, k := range setKeys(t, cli, ks) {
		if strings.HasPrefix(k[strings.LastIndexByte(k, '/')+1:], "p") {
			out = append(out, k)
		}
	}
	return out
}

// A one-job edit of a format 3 set writes its shard's part, the one page
// that names it, and a pointer that lists pages, not parts; superseded
// parts and pages are collected and the others stay.
func TestPagesApplyWritesWhatChanged(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("pages")
	const shards = 64 // pages of 8 shards
	opts := ApplyOptions{Shards: shards, Format: 3}
	all := jobs(0, 2000, 1)
	first := mustApply(t, cli, ks, all, opts)
	if first.Format != 3 || first.Parts != shards || first.Pages != shards/8 {
		t.Fatalf("first apply = %+v, want format 3, %d parts and %d pages", first, shards, shards/8)
	}
	if set := mustLoad(t, cli, ks); fingerprint(set.Jobs) != fingerprint(all) || set.Version != first.Version {
		t.Fatal("the loaded set differs from the applied one")
	}

	edited := jobs(0, 2000, 1)
	edited[1234].Schedule = "@every 7s"
	second := mustApply(t, cli, ks, edited, opts)
	if !second.Applied || second.Parts != 1 || second.Pages != 1 {
		t.Fatalf("one-job edit = %+v, want one part and one page", second)
	}
	if got := mustLoad(t, cli, ks); fingerprint(got.Jobs) != fingerprint(edited) || got.Version != second.Version {
		t.Fatalf("after the edit loaded version %d, want %d with the edit", got.Version, second.Version)
	}
	s := keyspace.ShardOf(edited[1234].Name, shards)
	want := map[string]bool{ks.JobPart(second.Version, s, 0): true, ks.JobPage(second.Version, s/8): true}
	keys := setKeys(t, cli, ks)
	if len(keys) != shards+shards/8 {
		t.Fatalf("%d keys stored after the edit, want %d (a part per shard, a page per 8)", len(keys), shards+shards/8)
	}
	for _, k := range keys {
		if strings.HasPrefix(k, ks.JobSet(second.Version)) && !want[k] {
			t.Fatalf("key %s written by the edit is neither its part nor its page", k)
		}
		delete(want, k)
	}
	if len(want) != 0 {
		t.Fatalf("the edit's part or page is missing: %v", want)
	}
	resp, err := cli.Get(testCtx(t, 10*time.Second), ks.JobsCurrent())
	if err != nil {
		t.Fatal(err)
	}
	if v := resp.Kvs[0].Value; strings.Contains(string(v), `"parts"`) || second.Put > int64(len(v))+second.Bytes+2048 {
		t.Fatalf("pointer %s, put %d bytes in all: want pages only, the part and a page beside it", v, second.Put)
	}
	if again := mustApply(t, cli, ks, edited, opts); again.Applied {
		t.Fatalf("reapplying the same set wrote %+v", again)
	}
}

// Between formats 2 and 3 only the pointer and the pages change: the
// parts are the same, named again. Up waits for a change unless asked;
// down (a member may need the older format) does not wait. Every step
// leaves only what its pointer names.
func TestPagesFormatTransitions(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("pagetransit")
	set := jobs(0, 300, 1)
	mustApply(t, cli, ks, set, ApplyOptions{})
	if r := mustApply(t, cli, ks, set, ApplyOptions{Shards: 16, Format: 3}); r.Applied {
		t.Fatalf("an unchanged set was rewritten in format 3 unasked: %+v", r)
	}
	for _, step := range []struct {
		shards, format int
		rewrite        bool
		parts, pages   int
	}{
		{16, 3, true, 16, 4},  // 1 to 3: every part and page
		{16, 2, false, 0, 0},  // 3 to 2: the pointer only
		{16, 3, true, 0, 4},   // 2 to 3: the pages only
		{32, 3, true, 32, 4},  // another shard count: everything
		{0, 1, false, 0, 0},   // 3 to 1
		{16, 3, true, 16, 4},  // and up again
		{16, 0, false, 0, 0},  // the zero Format writes 2 (what 7359ad3 reads)
		{16, 3, false, -1, 4}, // unchanged, not asked: nothing
	} {
		r := mustApply(t, cli, ks, set, ApplyOptions{Shards: step.shards, Format: step.format, Rewrite: step.rewrite})
		if step.parts < 0 {
			if r.Applied {
				t.Fatalf("an unchanged set was rewritten unasked: %+v", r)
			}
			continue
		}
		want := max(step.format, min(step.shards, 1)+1)
		if !r.Applied || r.Format != want || r.Parts != step.parts || r.Pages != step.pages {
			t.Fatalf("apply with Shards %d Format %d = %+v, want format %d, %d parts and %d pages written", step.shards, step.format, r, want, step.parts, step.pages)
		}
		got := mustLoad(t, cli, ks)
		if got.Version != r.Version || fingerprint(got.Jobs) != fingerprint(set) {
			t.Fatalf("Shards %d: loaded version %d, want %d with the same jobs", step.shards, got.Version, r.Version)
		}
		_, p, err := loadCurrent(testCtx(t, time.Minute), cli, ks)
		if err != nil {
			t.Fatal(err)
		}
		named := len(p.Pages)
		for _, pr := range p.Parts {
			named += pr.Chunks
		}
		if keys := setKeys(t, cli, ks); p.Format >= 2 && len(keys) != named {
			t.Fatalf("format %d: %d keys stored, the pointer names %d: %v", p.Format, len(keys), named, keys)
		}
		if pk := pageKeys(t, cli, ks); p.Format < 3 && len(pk) != 0 {
			t.Fatalf("format %d: pages left behind: %v", p.Format, pk)
		}
	}
}

// Pages are checked like parts: a page edited, missing, named with
// another digest, or naming a part of another page's shards makes the set
// unusable (ErrCorrupt), never half-read.
func TestPagesCorruptionRefused(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ks := keyspace.New("pagebad")
	ctx := testCtx(t, time.Minute)
	r := mustApply(t, cli, ks, jobs(0, 400, 1), ApplyOptions{Shards: 16, Format: 3})
	resp, err := cli.Get(ctx, ks.JobsCurrent())
	if err != nil {
		t.Fatal(err)
	}
	orig := string(resp.Kvs[0].Value)
	pg, other := ks.JobPage(r.Version, 1), ks.JobPage(r.Version, 2)
	pv, err := cli.Get(ctx, pg)
	if err != nil || len(pv.Kvs) != 1 {
		t.Fatalf("page %s: %v", pg, err)
	}
	ov, err := cli.Get(ctx, other)
	if err != nil || len(ov.Kvs) != 1 {
		t.Fatalf("page %s: %v", other, err)
	}
	restore := func() {
		if _, err := cli.Put(ctx, pg, string(pv.Kvs[0].Value)); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Put(ctx, ks.JobsCurrent(), orig); err != nil {
			t.Fatal(err)
		}
	}
	p, err := decodePointer([]byte(orig))
	if err != nil || len(p.Pages) != 4 {
		t.Fatalf("pointer %s: %v", orig, err)
	}
	putPointer := func(edit func(p *pointer)) {
		q := p
		q.Pages = append([]pageRef(nil), p.Pages...)
		edit(&q)
		_, err = cli.Put(ctx, ks.JobsCurrent(), mustJSON(t, q))
	}
	cases := []damageCase{
		{"a page replaced by another's bytes", func() { _, err = cli.Put(ctx, pg, string(ov.Kvs[0].Value)) }},
		{"a page deleted", func() { _, err = cli.Delete(ctx, pg) }},
		{"a page's digest edited in the pointer", func() { putPointer(func(q *pointer) { q.Pages[1].Digest = q.Pages[2].Digest }) }},
		{"another page's bytes under its digest", func() {
			_, err = cli.Put(ctx, pg, string(ov.Kvs[0].Value))
			if err == nil {
				putPointer(func(q *pointer) {
					q.Pages[1] = pageRef{Page: 1, Version: r.Version, Parts: q.Pages[2].Parts, Jobs: q.Pages[2].Jobs, Digest: q.Pages[2].Digest}
				})
			}
		}},
		{"a page of a later version", func() { putPointer(func(q *pointer) { q.Pages[0].Version++ }) }},
		{"a pointer listing parts too", func() {
			_, err = cli.Put(ctx, ks.JobsCurrent(), strings.Replace(orig, `"pages":`, `"parts":[{"s":1,"v":1,"c":1,"j":1,"b":1,"d":"x"}],"pages":`, 1))
		}},
		{"a job count off by one", func() { putPointer(func(q *pointer) { q.Jobs++; q.Pages[0].Jobs++ }) }},
	}
	refusedEach(t, cli, ks, cases, func() error { return err }, restore, 400)
}

// What an edit puts into etcd besides its part, by format and shard
// count up to keyspace.MaxShards, with a part in every shard: the pointer,
// and in format 3 the one page the edit rewrites. Pure: no etcd.
func TestPagesPointerBytes(t *testing.T) {
	ks := keyspace.New("sizes")
	for _, shards := range []int{1, 7, 1024, keyspace.MaxShards} {
		p2, p3, page := pointerBytes(t, ks, shards)
		t.Logf("shards %d: format 2 pointer %d B; format 3 pointer %d B + page %d B", shards, p2, p3, page)
		if shards >= 1024 && p3+page > 48<<10 {
			t.Fatalf("shards %d: an edit puts a %d B pointer and a %d B page, want under 48 KiB together", shards, p3, page)
		}
	}
}

// pointerBytes is the pointer of a set of shards parts at version 1e9
// with realistic refs, in format 2 and 3, and the page a one-part edit of
// the format 3 set writes.
func pointerBytes(t testing.TB, ks keyspace.Space, shards int) (p2, p3, page int) {
	const v = int64(1_000_000_000)
	parts := make([]partRef, shards)
	for s := range parts {
		parts[s] = partRef{Shard: s, Version: v - int64(s), Chunks: 1, Jobs: 1_000_000 / shards, Bytes: 12_345, Digest: strings.Repeat("x", 22)}
	}
	size := func(p pointer) int {
		b, err := p.encode()
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	two := partsPointer(v, shards, parts)
	three, _, err := pagedPointer(ks, two, pointer{})
	if err != nil {
		t.Fatal(err)
	}
	edited := append([]partRef(nil), parts...)
	edited[shards/2].Version, edited[shards/2].Digest = v+1, strings.Repeat("y", 22)
	next := partsPointer(v+1, shards, edited)
	four, writes, err := pagedPointer(ks, next, three)
	if err != nil || len(writes) != 1 {
		t.Fatalf("shards %d: an edit of one part wrote %d pages, want 1 (%v)", shards, len(writes), err)
	}
	return size(two), size(four), len(writes[0].key) + len(writes[0].val)
}

// BenchmarkPointerBytes reports what TestPagesPointerBytes checks.
func BenchmarkPointerBytes(b *testing.B) {
	ks := keyspace.New("sizes")
	for _, shards := range []int{1024, keyspace.MaxShards} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			var p2, p3, page int
			for b.Loop() {
				p2, p3, page = pointerBytes(b, ks, shards)
			}
			b.ReportMetric(float64(p2), "format2-pointer-B")
			b.ReportMetric(float64(p3), "format3-pointer-B")
			b.ReportMetric(float64(page), "format3-page-B")
		})
	}
}

// Format asks for a layout the shard count can give: 1 without Shards,
// 2 or 3 with them, nothing newer than this binary writes.
func TestApplyOptionsFormat(t *testing.T) {
	for _, c := range []struct {
		o    ApplyOptions
		ok   bool
		want int
	}{
		{ApplyOptions{}, true, 1},
		{ApplyOptions{Shards: 8}, true, 2},
		{ApplyOptions{Shards: 8, Format: 3}, true, 3},
		{ApplyOptions{Format: 1}, true, 1},
		{ApplyOptions{Shards: 8, Format: 1}, false, 0},
		{ApplyOptions{Format: 3}, false, 0},
		{ApplyOptions{Shards: 8, Format: Format + 1}, false, 0},
		{ApplyOptions{Shards: 8, Format: -1}, false, 0},
	} {
		err := c.o.Validate()
		if (err == nil) != c.ok || (c.ok && c.o.format() != c.want) || (!c.ok && !errors.Is(err, ErrInvalidConfig)) {
			t.Errorf("%+v: Validate = %v, format %d; want ok %v and format %d", c.o, err, c.o.format(), c.ok, c.want)
		}
	}
}
