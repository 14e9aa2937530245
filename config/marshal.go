package config

import (
	"bytes"
	"encoding/json"
	"time"

	"go.yaml.in/yaml/v3"
)

// MarshalJobs writes jobs as a jobs file that ParseJobs reads back to the
// same jobs (Since, which the file does not hold, aside). Fields equal to
// their zero value are left out; defaults already set are written out, so
// the file says exactly what runs.
func MarshalJobs(jobs []Job) ([]byte, error) { return MarshalJobsNoted(jobs, nil) }

// MarshalJobsNoted is MarshalJobs with a comment line above each job that
// notes names (`export` says there which jobs `shardcron suspend` holds).
// Comments change nothing ParseJobs reads.
func MarshalJobsNoted(jobs []Job, notes map[string]string) ([]byte, error) {
	if jobs == nil {
		jobs = []Job{}
	}
	var root yaml.Node
	if err := root.Encode(struct {
		Jobs []Job `yaml:"jobs"`
	}{jobs}); err != nil {
		return nil, err
	}
	if len(notes) > 0 && len(root.Content) == 2 {
		for i, item := range root.Content[1].Content {
			if note, ok := notes[jobs[i].Name]; ok {
				item.HeadComment = note
			}
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// MarshalJobsJSON writes jobs as a jobs file in JSON (which ParseJobs reads
// as YAML), without the fields the job store sets (Since, Resumed,
// SuspendedAt, Rescheduled).
func MarshalJobsJSON(jobs []Job) ([]byte, error) {
	out := make([]Job, len(jobs))
	for i := range jobs {
		out[i] = jobs[i]
		out[i].Since, out[i].Resumed, out[i].SuspendedAt, out[i].Rescheduled = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	}
	b, err := json.MarshalIndent(struct {
		Jobs []Job `json:"jobs"`
	}{out}, "", "  ")
	return append(b, '\n'), err
}
