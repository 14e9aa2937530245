package config

import (
	"errors"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Limits of a jobs file. Past each, parsing fails with a message naming it.
const (
	// MaxJobs is the most jobs one file (and one cluster) holds.
	MaxJobs = 1_000_000
	// MaxUnits is the most units one file (and one cluster) holds: each
	// job without items is one, each item of a sharded job another. A
	// replica holds the schedule of every unit of its shards.
	MaxUnits = 2_000_000
	// MaxNameLen is the longest job name, in bytes.
	MaxNameLen = 128
)

// maxJobs and maxFileSize are MaxJobs and MaxFileSize; tests lower them to
// reach the limits without files of hundreds of megabytes.
var (
	maxJobs     = MaxJobs
	maxFileSize = MaxFileSize
)

var (
	jobFields   = []string{"name", "schedule", "timezone", "at", "start_at", "end_at", "max_runs", "jitter", "items", "item_names", "http", "exec", "func", "timeout", "concurrency", "misfire", "starting_deadline", "suspend", "retries", "env", "keep_output", "notify"}
	httpFields  = []string{"url", "method", "headers", "body", "expect_status", "follow_redirects"}
	execFields  = []string{"command", "dir"}
	retryFields = []string{"attempts", "backoff"}
)

// JobsOptions tunes ParseJobsWith to the program that reads the file.
type JobsOptions struct {
	// HasFunc reports whether the program has an in-process function
	// registered under name; a func: job naming another is an error (it
	// would fail every run). Nil accepts every name: a program that embeds
	// shardcron may read files meant for other programs. It may be called
	// from several goroutines at once: entries are checked in parallel.
	HasFunc func(name string) bool
}

// LoadJobs reads and parses the jobs file at path; see ParseJobs.
func LoadJobs(path string) ([]Job, error) { return LoadJobsWith(path, JobsOptions{}) }

// LoadJobsWith is LoadJobs with options.
func LoadJobsWith(path string, o JobsOptions) ([]Job, error) {
	data, err := readFile(path, maxFileSize)
	if err != nil {
		return nil, fileError(path, err)
	}
	return ParseJobsWith(path, data, o)
}

// ParseJobs parses a jobs file (filename only labels the messages), checks
// every job and fills in defaults. It returns either every job, in file
// order, or nil and an Errors listing every problem found, each as
// "file:line: job "name": field "f": message". Nothing is returned half-way.
func ParseJobs(filename string, data []byte) ([]Job, error) {
	return ParseJobsWith(filename, data, JobsOptions{})
}

// ParseJobsWith is ParseJobs with options.
func ParseJobsWith(filename string, data []byte, o JobsOptions) ([]Job, error) {
	r, err := parseJobs(filename, data, o, nil)
	if err != nil {
		return nil, err
	}
	return r.jobs, nil
}

// CheckJobsWith parses and checks a jobs file as ParseJobsWith does, but
// keeps no job: it hands each job that passes its own checks to each (when
// not nil) as it is read, and returns how many there are. What validate
// needs, without holding a million jobs. each sees the jobs of a file that
// may yet turn out invalid; the error says so at the end.
func CheckJobsWith(filename string, data []byte, o JobsOptions, each func(*Job)) (int, error) {
	if each == nil {
		each = func(*Job) {}
	}
	r, err := parseJobs(filename, data, o, each)
	if err != nil {
		return 0, err
	}
	return r.count, nil
}

// CheckJobsFile is CheckJobsWith of the file at path.
func CheckJobsFile(path string, o JobsOptions, each func(*Job)) (int, error) {
	data, err := readFile(path, maxFileSize)
	if err != nil {
		return 0, fileError(path, err)
	}
	return CheckJobsWith(path, data, o, each)
}

// parseJobs reads the file a job at a time if it can, else whole.
func parseJobs(filename string, data []byte, o JobsOptions, each func(*Job)) (*jobReader, error) {
	r, err := parseSplit(filename, data, o, each)
	if errors.Is(err, errNotSplit) {
		var sf *splitFailed
		if errors.As(err, &sf) {
			if err := sf.yamlErrorFrom(filename, data); err != nil {
				return nil, err
			}
		}
		return parseWhole(filename, data, o, each)
	}
	return r, err
}

// parseWhole parses data as one yaml.Node tree: every file, exactly, but a
// tree of a million jobs takes gigabytes. parseSplit reads the usual files
// a job at a time and leaves the others, and every file with a YAML
// problem, to it.
func parseWhole(filename string, data []byte, o JobsOptions, each func(*Job)) (*jobReader, error) {
	c := &collector{file: filename}
	root := parseDoc(c, data, maxFileSize)
	if len(c.errs) > 0 {
		return nil, c.err()
	}
	if root == nil {
		c.addf(0, "", "empty file: want a mapping with a jobs list (jobs: [] for none)")
		return nil, c.err()
	}
	if root.Kind != yaml.MappingNode {
		c.addf(root.Line, "", "the file must be a mapping with a jobs list, found %s", kindName(root))
		return nil, c.err()
	}
	items, defs := parseTop(c, root)
	if len(c.errs) > 0 {
		return nil, c.err()
	}
	r := newJobReader(c, o, defs, len(items), each)
	for i, n := range items {
		items[i] = nil // let the decoded subtree go: a 1,000,000-job tree is large
		r.add(n)
	}
	return r.result()
}

// parseTop reads the file's top mapping: the jobs list (its items, not yet
// decoded) and the defaults every job without its own notify takes.
func parseTop(c *collector, root *yaml.Node) ([]*yaml.Node, *Defaults) {
	var items []*yaml.Node
	var defNode *yaml.Node
	found := false
	top := &decoder{}
	top.mapping(root, "", false, func(key string, k, v *yaml.Node) {
		if key == "defaults" {
			defNode = v
			return
		}
		if key != "jobs" {
			top.unknown(k, key, []string{"jobs", "defaults"})
			return
		}
		found = true
		if v.Kind != yaml.SequenceNode {
			top.errorf(v, "jobs", "must be a list of jobs, found %s (jobs: [] for none)", kindName(v))
			return
		}
		items = v.Content
		if len(items) > maxJobs {
			top.errorf(k, "jobs", "%d jobs, more than the limit of %d", len(items), maxJobs)
			items = nil
		}
	})
	if !found {
		top.errorf(root, "", "no jobs list (jobs: [] for none)")
	}
	for _, e := range top.errs {
		c.add(e)
	}
	return items, parseDefaults(c, defNode)
}

// lineOf returns the line of field, else of its nearest enclosing field,
// else def.
func lineOf(lines map[string]int, field string, def int) int {
	for f := field; f != ""; {
		if l, ok := lines[f]; ok {
			return l
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return def
}

// decodeJob reads one entry of the jobs list. Problems go to the returned
// decoder; validation of the values happens afterwards, in validateJob.
func decodeJob(n *yaml.Node) (Job, *decoder) {
	d := &decoder{lines: map[string]int{}}
	var j Job
	d.mapping(n, "", false, func(key string, k, v *yaml.Node) {
		switch key {
		case "name":
			j.Name, _ = d.str(v, key)
		case "schedule":
			j.Schedule, _ = d.str(v, key)
		case "timezone":
			j.Timezone, _ = d.nonEmpty(v, key, "omit it for UTC")
		case "at":
			var ok bool
			if j.At, ok = d.timestamp(v, key); !ok {
				d.failed["schedule"] = true // schedule or at cannot be judged
			}
		case "start_at":
			j.StartAt, _ = d.timestamp(v, key)
		case "end_at":
			j.EndAt, _ = d.timestamp(v, key)
		case "max_runs":
			if n, ok := d.integer(v, key); ok {
				if n == 0 {
					d.errorf(v, key, "must be at least 1 (omit it for no limit)")
				}
				j.MaxRuns = n
			}
		case "jitter":
			j.Jitter, _ = d.duration(v, key)
		case "items", "item_names":
			d.items(&j, key, v)
		case "http":
			j.HTTP = d.httpTarget(v)
		case "exec":
			j.Exec = d.execTarget(v)
		case "func":
			j.Func, _ = d.nonEmpty(v, key, "name a registered function")
		case "timeout":
			if t, ok := d.duration(v, key); ok {
				if t == 0 {
					d.errorf(v, key, "must be more than 0 (omit it for the default, %v)", Duration(DefaultTimeout))
				}
				j.Timeout = t
			}
		case "concurrency":
			s, _ := d.nonEmpty(v, key, "omit it for the default, forbid")
			j.Concurrency = Concurrency(s)
		case "misfire":
			s, _ := d.nonEmpty(v, key, "omit it for the default, run_once")
			j.Misfire = Misfire(s)
		case "starting_deadline":
			j.StartingDeadline, _ = d.duration(v, key)
		case "suspend":
			j.Suspend, _ = d.boolean(v, key)
		case "retries":
			j.Retries = d.retries(v)
		case "env":
			j.Env, _ = d.strMap(v, key, false)
		case "keep_output":
			if b, ok := d.boolean(v, key); ok {
				j.KeepOutput = &b
			}
		case "notify":
			j.Notify = d.notify(v, key)
		default:
			d.unknown(k, key, jobFields)
		}
	})
	return j, d
}

// items reads items (a count) or item_names into j.
func (d *decoder) items(j *Job, key string, v *yaml.Node) {
	if key == "items" {
		if n, ok := d.integer(v, key); ok {
			if n == 0 {
				d.errorf(v, key, "must be at least 1 (omit it for a job without items)")
			}
			j.Items = n
		}
		return
	}
	if names, ok := d.strList(v, key); ok {
		if len(names) == 0 {
			d.errorf(v, key, "names no item (omit it for a job without items)")
		}
		j.ItemNames = names
	}
}

func (d *decoder) httpTarget(n *yaml.Node) *HTTPTarget {
	h := &HTTPTarget{}
	ok := d.mapping(n, "http", false, func(key string, k, v *yaml.Node) {
		field := "http." + key
		switch key {
		case "url":
			h.URL, _ = d.str(v, field)
		case "method":
			h.Method, _ = d.nonEmpty(v, field, "omit it for the default, POST")
		case "headers":
			h.Headers, _ = d.strMap(v, field, true)
		case "body":
			h.Body, _ = d.str(v, field)
		case "expect_status":
			h.ExpectStatus, _ = d.intList(v, field)
		case "follow_redirects":
			s, _ := d.nonEmpty(v, field, "omit it for the default, same_host")
			h.FollowRedirects = Redirects(s)
		default:
			d.unknown(k, field, httpFields)
		}
	})
	if !ok {
		return &HTTPTarget{} // present but broken: still counts as the job's target
	}
	return h
}

func (d *decoder) execTarget(n *yaml.Node) *ExecTarget {
	e := &ExecTarget{}
	ok := d.mapping(n, "exec", false, func(key string, k, v *yaml.Node) {
		field := "exec." + key
		switch key {
		case "command":
			e.Command, _ = d.strList(v, field)
		case "dir":
			e.Dir, _ = d.nonEmpty(v, field, "omit it for the server's working directory")
		default:
			d.unknown(k, field, execFields)
		}
	})
	if !ok {
		return &ExecTarget{}
	}
	return e
}

func (d *decoder) retries(n *yaml.Node) *Retries {
	r := &Retries{}
	d.mapping(n, "retries", false, func(key string, k, v *yaml.Node) {
		field := "retries." + key
		switch key {
		case "attempts":
			r.Attempts, _ = d.integer(v, field)
		case "backoff":
			if b, ok := d.duration(v, field); ok {
				if b == 0 {
					d.errorf(v, field, "must be more than 0 (omit it for the default, %v)", Duration(DefaultBackoff))
				}
				r.Backoff = b
			}
		default:
			d.unknown(k, field, retryFields)
		}
	})
	return r
}
