// Package sim is a deterministic simulator of shardcron's delivery
// contract (DESIGN.md "The simulator", "Delivery semantics").
//
// One seed drives one simulation inside one testing/synctest bubble: N
// nodes, each a real *scheduler.Scheduler built with scheduler.New over
// this package's ports (ports.go), against a model of the fenced store
// (model.go: a global revision, shard keys whose CreateRevision is the
// generation, records with ModRevisions, trigger requests, per-node leases
// that expire on the store's own virtual clock, transactions whose
// comparisons really fail, the completion journal's values per session).
// Every node reads the journal, so every node's scheduler writes it
// (scheduler.Config.Journal) in bursts whose due ticks wait for run slots:
// with the default 64 slots rarely, with Config.Slots 8
// (TestSimJournalSeeds) often. An ownership layer (world.go) plays the shard
// and lease packages: it acquires free shards and hands the Grant with the
// checkpoint and the consumed release marker, keeps each node's safe
// deadline (sent_at of the last renewal + TTL - margin), ends Grants on a
// fence failure or past the deadline, and releases gracefully by Drain,
// then one transaction that deletes the shard key and writes the marker.
// The receiver (the Runner port) records every run: job, tick, token,
// re-run mark, trigger, node, virtual start and end.
//
// # Determinism
//
// Every choice comes from one math/rand/v2 source seeded by the seed.
// Every store call and every run's end waits on a channel the sim answers;
// the sim's loop does synctest.Wait, then one action (sorted by a
// deterministic key: send time, node, call content), or sleeps to the next
// thing due. Runs that start at one instant are recorded in the order the
// runtime ran them, so the history is sorted before it is hashed.
// TestSimDeterministic runs seeds twice and compares the hashes. The
// scheduler's loop takes in one batch whatever has arrived, so nothing may
// race to it: the sim hands triggers and grants one call at a time, each
// taken in alone (oneByOne); its runner's refusals return when the sim
// says, as ended runs do; drains that end at one instant are taken by node
// and shard; and the scheduler itself hands claimed runs to workers at the
// end of a step and keeps runs held for contact in its loop
// (docs/simulator.md, "Replay").
//
// The shard package's contact probe is modelled, not sent (probe.go): on
// beats of 50 ms while the node's scheduler expects a run within 100 ms
// (scheduler.Contact.Expect), and at once when an expected run comes
// within that reach, as lease.Contact.Soon wakes the real one.
//
// # Nemesis
//
// Crash a node (memory lost, store kept; restarted later with a fresh
// Scheduler and a new session), at random or, one journal write in four,
// within 200 ms of its landing (before the records of the completions it
// names, which wait up to 600 ms), pause one past its deadline (its store
// calls and run starts wait), partition one from the store (its calls hang
// or fail with ErrUnknown; its runs still reach the receiver), drain a
// shard (a graceful move), edit, remove and re-add jobs, suspend and
// resume, trigger manual runs, slow commits and journal writes, drop them
// (ErrUnknown, not landed) and lose their answers (landed, ErrUnknown). About one job in six
// is shaped (Config.Shaped): a start_at/end_at window, max_runs, or a
// one-shot at; the checker takes its ticks from the shaped schedule
// (config.Job.Fires). About one job in four is sharded (Config.Items):
// 2-6 items or 2-4 item_names, each item a unit of its own
// (config.UnitName: its own shard, record, trigger requests and history);
// edits grow or shrink its count and reorder, rename, drop or add its
// names, and a manual trigger goes to one of its units or to each. About
// one job in five whose ticks are 2 s or more apart has a jitter
// (Config.Jitter); the checker names its runs by their tick and judges
// when each came due by its fire. The last part of a run (Config.Quiet) heals
// everything and resumes every job so catch-up can finish before the
// checker reads the history.
//
// Clock steps: each node reads its wall clock through scheduler.Config.Clock,
// which the nemesis steps up to 5 s either way (skew between owners); the
// checker judges "came due" within the largest step (History.Skew). A pause
// cannot stop a node's goroutines: its store calls and run starts wait, its
// scheduler loop goes on (as a slow target would make it), its Grants still
// end at the deadline, as the exec supervisor's dead man's switch would,
// and its runner checks the deadline after the pause. So the checker judges
// forbid and suspensions by when the owner handed a run to its runner
// (Run.Called), and delivery by when it reached the receiver (Run.Start).
// Every fault is recorded by node and span (History.Faults).
//
// # Checker
//
// properties.go (and properties_manual.go, for trigger requests) holds
// one function per property, each over units: a job, or one item of a
// sharded job, keyed by its unit name (an item an edit
// drops is out of the job set, as a removed job; a suspension is its
// job's, whichever items the job has then). No tick lost under its
// misfire policy (jobs never edited nor removed; forbid excuses a tick
// that came due while a run of the job ran, and a job that may skip by
// its policy skips only as its record says); no repeat of (job, tick)
// unless the later run is marked Rerun (or is a retry attempt of the same
// token); no tick of a suspended stretch ever run, no tick at or before
// the resume run after it, nothing started while suspended; no tick run
// that no definition of the job yielded when it came due (an edit's new
// schedule takes effect when applied); no run
// started at or after its owner's safe deadline; forbid never overlaps; a
// manual run exactly once; and no repeat after a quiet fault: a tick that
// ran to its end is run again only if a fault touched its owner between
// the run's start and 300 ms after its end (or its session was already
// running out). A violation prints the seed and the stretch of
// history around it: the job's runs, store writes and job set changes, and
// its shard's and the nodes' events; -sim.seed=N -v prints all of it.
//
// # Entry points
//
//	go test ./sim -run TestSimSeeds                   CI seeds + testdata/seeds.txt
//	go test ./sim -run TestSimSeeds -sim.seed=N -v    replay one seed, verbosely
//	go test ./sim -run TestSimSeeds -sim.seeds=N -sim.start=K   a long run
//	... -sim.seeds=N -sim.hashes=FILE   every seed's history hash: a refactor
//	                                    that changes nothing keeps every line
//	... -sim.items=false                 no sharded jobs
//	... -sim.nodes=5 -sim.shards=8 -sim.jobs=12   another cluster size
//	make sim                                          100,000 seeds
//
// A seed that fails is kept in testdata/seeds.txt with the property it
// broke and the suspected bug.
package sim
