// Command jobsgen writes a jobs file of -n realistic jobs to standard
// output, for measuring validate, apply and replicas at scale (BENCHMARKS.md,
// "A million jobs"): http jobs spread with H over a few schedules and time
// zones, some with headers, a tenth with retries. -edit k changes the
// schedule of job k only (a one-job edit of the same file); -seed varies
// every job (an apply that changes them all); -yearly puts every job on a
// yearly schedule, so that replicas holding them do not fire them.
//
//	go run ./bench/jobsgen -n 1000000 > /tmp/jobs-1m.yaml
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
)

func main() {
	n := flag.Int("n", 100_000, "jobs")
	edit := flag.Int("edit", -1, "index of the one job whose schedule differs (-1: none)")
	seed := flag.Int("seed", 0, "varies every job's timeout, so two seeds differ in every job")
	yearly := flag.Bool("yearly", false, "every job on \"H H H H H *\" (once a year): replicas hold the jobs without firing them, for heap figures")
	flag.Parse()
	if *yearly {
		schedules = []string{"H H H H H *"}
	}
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	if err := write(w, *n, *edit, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "jobsgen:", err)
		os.Exit(1)
	}
}

var (
	zones     = []string{"", "", "Europe/Berlin", "America/New_York", "Asia/Tokyo", ""}
	schedules = []string{"H H/5 * * * *", "H H * * * *", "H H H * * *", "H H(0-29)/10 * * * *", "H H H * * 1-5"}
)

func write(w *bufio.Writer, n, edit, seed int) error {
	fmt.Fprintf(w, "# %d jobs, written by bench/jobsgen\njobs:\n", n)
	for i := range n {
		sch := schedules[i%len(schedules)]
		if i == edit {
			sch = "H H H H(1-28) H *"
		}
		fmt.Fprintf(w, "  - name: tenant-%07d.sync\n    schedule: %q\n", i, sch)
		if z := zones[i%len(zones)]; z != "" {
			fmt.Fprintf(w, "    timezone: %s\n", z)
		}
		fmt.Fprintf(w, "    http:\n      url: \"${SHARDCRON_JOB_SINK_URL}/sync?tenant=%d\"\n", i)
		if i%3 == 0 {
			fmt.Fprintf(w, "      headers: {Authorization: \"Bearer ${SHARDCRON_JOB_TOKEN}\"}\n")
		}
		fmt.Fprintf(w, "    timeout: %ds\n", 10+seed%50)
		if i%10 == 0 {
			fmt.Fprintf(w, "    retries: {attempts: 3, backoff: 5s}\n")
		}
	}
	return w.Flush()
}
