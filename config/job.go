package config

import "time"

// Concurrency says what a tick does while the job's previous run is still
// going.
type Concurrency string

const (
	ConcurrencyAllow   Concurrency = "allow"   // run alongside
	ConcurrencyForbid  Concurrency = "forbid"  // skip the tick, recorded as skipped
	ConcurrencyReplace Concurrency = "replace" // cancel the running one, then run
)

// Misfire says what a new owner does with ticks that came due while nobody
// ran them (ticks since a graceful release always run: a handoff is not a
// misfire).
type Misfire string

const (
	MisfireSkip    Misfire = "skip"     // record them as skipped
	MisfireRunOnce Misfire = "run_once" // run the latest one, skip the rest
	MisfireRunAll  Misfire = "run_all"  // run each, within the starting deadline
)

// Job is one entry of the jobs file, with defaults applied once validated.
// Exactly one of HTTP, Exec and Func is set.
type Job struct {
	Name             string            `yaml:"name" json:"name"`
	Schedule         string            `yaml:"schedule" json:"schedule"`
	Timezone         string            `yaml:"timezone,omitempty" json:"timezone,omitempty"`
	HTTP             *HTTPTarget       `yaml:"http,omitempty" json:"http,omitempty"`
	Exec             *ExecTarget       `yaml:"exec,omitempty" json:"exec,omitempty"`
	Func             string            `yaml:"func,omitempty" json:"func,omitempty"`
	Timeout          Duration          `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	Concurrency      Concurrency       `yaml:"concurrency,omitempty" json:"concurrency,omitempty"`
	Misfire          Misfire           `yaml:"misfire,omitempty" json:"misfire,omitempty"`
	StartingDeadline Duration          `yaml:"starting_deadline,omitempty" json:"starting_deadline,omitempty"`
	Suspend          bool              `yaml:"suspend,omitempty" json:"suspend,omitempty"`
	Env              map[string]string `yaml:"env,omitempty" json:"env,omitempty"`

	// Since is when a job of this name was first applied to the cluster; a
	// new owner never runs ticks before it. Set by the job store, not the file.
	Since time.Time `yaml:"-" json:"since,omitzero"`
}

// HTTPTarget is a request the job sends on every tick.
type HTTPTarget struct {
	URL     string            `yaml:"url" json:"url"`
	Method  string            `yaml:"method,omitempty" json:"method,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	Body    string            `yaml:"body,omitempty" json:"body,omitempty"`
	// ExpectStatus lists the statuses that count as success; empty means 2xx.
	ExpectStatus []int `yaml:"expect_status,omitempty" json:"expect_status,omitempty"`
}

// ExecTarget is a process the job starts on every tick, without a shell
// unless Command names one.
type ExecTarget struct {
	Command []string `yaml:"command" json:"command"`
	Dir     string   `yaml:"dir,omitempty" json:"dir,omitempty"`
}

// JobSet is a validated job set at one version of the cluster's jobs/ key
// space (0 for a set read from a file).
type JobSet struct {
	Version int64
	Jobs    []Job
}

// Duration is a time.Duration written as "30s" in YAML and JSON.
type Duration time.Duration

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
