package scheduler

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardcron/shardcron/config"
)

// An earlier owner crashed after two runs ended: the completion of one
// reached the journal, the other's did not. The successor takes the first
// out of flight without running it, and runs the second again, marked.
func TestJournaledCompletionNotRunAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-30 * time.Second))
		j := jobIn(2, "minutely", "0 * * * * *")
		j.Misfire = config.MisfireSkip
		h := newHarness(t, nil, j)
		defer h.stop()
		ended, cut := t0.Add(-2*time.Minute), t0.Add(-time.Minute)
		h.store.put(2, Record{Job: j.Name, Token: 5, LastClaimed: cut, InFlight: []Flight{{Tick: ended, Token: 5}, {Tick: cut, Token: 5}}})
		g, _ := h.grant(2, 9, nil)
		g.Checkpoint.Completed = map[string][]Completion{
			j.Name: {{Tick: ended, Token: 5}},
			// Lines that name no flight of the record change nothing: a
			// tick of another token, and another job.
			j.Name + "-x": {{Tick: cut, Token: 5}},
		}
		g.Checkpoint.Completed[j.Name] = append(g.Checkpoint.Completed[j.Name], Completion{Tick: cut, Token: 4})
		h.s.Acquired(g)
		sleepUntil(t0.Add(30 * time.Second)) // past t0, the next tick
		synctest.Wait()
		runs := h.runner.of(j.Name)
		if len(runs) != 2 {
			t.Fatalf("runs %+v, want the re-run of %v and the next tick", runs, cut)
		}
		if r := runs[0]; !r.Tick.Equal(cut) || r.Token != 9 || !r.Rerun {
			t.Errorf("re-run: %+v", r.Run)
		}
		if r := runs[1]; !r.Tick.Equal(t0) || r.Rerun {
			t.Errorf("next tick: %+v", r.Run)
		}
		if rec := h.store.record(2, j.Name); len(rec.InFlight) != 0 {
			t.Errorf("record still holds flights %+v", rec.InFlight)
		}
		if got := testutil.ToFloat64(h.s.m.folded); got != 1 {
			t.Errorf("journal_folded_total = %v, want 1", got)
		}
		if got := testutil.ToFloat64(h.s.m.reruns); got != 1 {
			t.Errorf("reruns_total = %v, want 1", got)
		}
	})
}

// The journal names a flight of a job the shard's job set does not hold
// yet (an orphan record): when the job is added, the flight is taken out,
// not run.
func TestJournaledCompletionOfOrphanAdded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sleepUntil(t0.Add(-30 * time.Second))
		j := jobIn(2, "minutely", "0 * * * * *")
		j.Misfire = config.MisfireSkip
		other := jobIn(2, "other", "0 0 * * * *")
		h := newHarness(t, nil, other)
		defer h.stop()
		ended := t0.Add(-time.Minute)
		h.store.put(2, Record{Job: j.Name, Token: 5, LastClaimed: ended, InFlight: []Flight{{Tick: ended, Token: 5}}})
		g, _ := h.grant(2, 9, nil)
		g.Checkpoint.Completed = map[string][]Completion{j.Name: {{Tick: ended, Token: 5}}}
		h.s.Acquired(g)
		synctest.Wait()
		h.s.SetJobs(config.JobSet{Version: 2, Jobs: []config.Job{other, j}})
		sleepUntil(t0.Add(30 * time.Second)) // past t0, the next tick
		synctest.Wait()
		runs := h.runner.of(j.Name)
		if len(runs) != 1 || !runs[0].Tick.Equal(t0) || runs[0].Rerun {
			t.Fatalf("runs %+v, want only the next tick %v", runs, t0)
		}
		if rec := h.store.record(2, j.Name); len(rec.InFlight) != 0 {
			t.Errorf("record still holds flights %+v", rec.InFlight)
		}
	})
}

func TestJournalRoundTrip(t *testing.T) {
	in := []JournalLine{
		{Shard: 0, Token: 1, Tick: time.Unix(1, 5).UTC(), Job: "a"},
		{Shard: 1023, Token: 1 << 40, Tick: t0, Job: "daily.report_x-1:item"},
	}
	out, err := DecodeJournal(AppendJournal(nil, in))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
	for i := range in {
		if out[i].Shard != in[i].Shard || out[i].Token != in[i].Token || !out[i].Tick.Equal(in[i].Tick) || out[i].Job != in[i].Job {
			t.Errorf("line %d: %+v, want %+v", i, out[i], in[i])
		}
	}
	if out, err := DecodeJournal(AppendJournal(nil, nil)); err != nil || len(out) != 0 {
		t.Errorf("empty journal: %+v, %v", out, err)
	}
}

func TestJournalRefusesWhatNoWriterWrote(t *testing.T) {
	for _, v := range []string{
		"",
		"shardcron-journal 2\n",
		"shardcron-journal 1\n3 5 100 job",        // not terminated
		"shardcron-journal 1\n3 5 100\n",          // no job
		"shardcron-journal 1\n-1 5 100 job\n",     // shard
		"shardcron-journal 1\n3 0 100 job\n",      // token
		"shardcron-journal 1\n3 5 1e9 job\n",      // tick
		"shardcron-journal 1\n3 5 100 job x\n",    // a space in the name
		"shardcron-journal 1\n3 5 100 job\n\n",    // an empty line
		"shardcron-journal 1\n3 5 100 a\nb c d\n", // a bad line after a good one
	} {
		if out, err := DecodeJournal([]byte(v)); err == nil {
			t.Errorf("%q decoded as %+v", v, out)
		}
	}
}

func FuzzDecodeJournal(f *testing.F) {
	f.Add(AppendJournal(nil, []JournalLine{{Shard: 3, Token: 7, Tick: t0, Job: "j"}}))
	f.Add([]byte("shardcron-journal 1\n3 5 100 job x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, err := DecodeJournal(b)
		if err != nil {
			return
		}
		again, err := DecodeJournal(AppendJournal(nil, lines))
		if err != nil || len(again) != len(lines) {
			t.Fatalf("re-encoded %+v: %+v, %v", lines, again, err)
		}
	})
}
