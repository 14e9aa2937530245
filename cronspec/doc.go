// Package cronspec turns a job's cron spec and IANA time zone into fire
// times.
//
// Specs are parsed by github.com/robfig/cron/v3 (5 fields, or 6 with seconds
// first, names such as jan or mon, and the descriptors @yearly, @annually,
// @monthly, @weekly, @daily, @midnight, @hourly and @every), but fire times
// are computed here, not by robfig's SpecSchedule.Next, so that daylight
// saving time follows docs/design.md ("Time"):
//
//   - Fixed-time jobs (neither the minute nor the hour field is a wildcard
//     or a step; @daily, @weekly, @monthly, @yearly) follow ISC cron: a
//     wall time in a skipped hour fires once, at the first instant after
//     the gap; a wall time in a repeated hour fires once, at its earlier
//     instant.
//   - Interval jobs (the minute or the hour field is a wildcard or a step,
//     such as "*/10 * * * * *", "0 * * * *" or @hourly) follow the wall
//     clock: they fire at every instant whose wall reading matches, so a
//     skipped hour has no fires and a repeated hour fires twice.
//   - "@every d" fires at every multiple of d since the Unix epoch
//     (1970-01-01T00:00:00Z), so every replica agrees on the phase without
//     coordinating; it ignores the time zone.
//   - H in a field (ParseJob; Parse refuses it) is a stable per-job value
//     hashed from the job's name, as in Jenkins: H picks one value of the
//     field (the day of month from 1-28), H(a-b) one value in a..b, H/n
//     steps of n from an offset below n, H(a-b)/n the same within a..b.
//     The value is xxhash64(name, 0, field name) mod the choices
//     (HashOffset), so every replica, restart and release agrees. H
//     resolves before the fixed-time test: "H H * * *" is fixed-time,
//     "H/15 * * * *" an interval job. "H H * * * *" spreads jobs over the
//     hour's 3,600 seconds.
//   - A Shape (shape.go) bounds and spreads a schedule and keeps it a
//     Schedule: a window (no tick before StartAt or after EndAt), the
//     first MaxRuns ticks after an anchor (the job's first apply), and a
//     jitter that fires each tick n at n + JitterOffset(name, n, jitter),
//     whole seconds in [0, jitter), the same on every replica. At is a
//     one-shot schedule. A jittered schedule's times are fires; Nominal
//     maps a fire back to its tick, which stays the run's identity.
//
// robfig's own Next differs (checked against v3.0.1): it skips a fixed time
// in a skipped hour altogether ("30 2 * * *" in New York does not run on
// 2026-03-08, because stepping 01:00 by an hour lands on 03:00), runs a
// fixed time in a repeated hour twice (01:30 EDT and 01:30 EST on
// 2026-11-01), and its @every counts from the time asked, so two replicas
// disagree on the phase. Its interval behaviour matches ours.
//
// Invariants: Parse never panics and rejects what could misbehave later:
// TZ= and CRON_TZ= prefixes (the job's timezone field says it; "TZ=" without
// a value panics inside robfig), @every below one second or not a whole
// number of seconds, unknown or host-dependent time zones ("Local"), and
// specs with no fire time within 9 years from 2024-01-01 (Feb 29 recurs
// within 8 years even across 2100), such as "0 0 30 2 *". Next is a pure
// function of its argument, safe for concurrent use, does not allocate, and
// returns a time strictly after its argument, on a whole second, or the zero
// time when there is none within 9 years of it (never for a spec Parse
// accepted).
//
// Time zone data is embedded (time/tzdata), so a host without
// /usr/share/zoneinfo computes the same fire times as every other replica;
// tzdata installed on the host, when present, takes precedence, as the
// time package does.
package cronspec
