package config

import (
	"bytes"

	"go.yaml.in/yaml/v3"
)

// MarshalJobs writes jobs as a jobs file that ParseJobs reads back to the
// same jobs (Since, which the file does not hold, aside). Fields equal to
// their zero value are left out; defaults already set are written out, so
// the file says exactly what runs.
func MarshalJobs(jobs []Job) ([]byte, error) {
	if jobs == nil {
		jobs = []Job{}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(struct {
		Jobs []Job `yaml:"jobs"`
	}{jobs}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
