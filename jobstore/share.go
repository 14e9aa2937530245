package jobstore

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unique"

	"github.com/shardcron/shardcron/config"
)

// Decoded jobs share what many of them hold alike: a set has few
// schedules, zones and methods, and its jobs often carry the same headers,
// environment, retries or notification (a file's defaults are copied into
// every job). A decoded definition is never changed (Held), so sharing is
// safe, and a replica keeps per held job little more than its name and
// target. Strings are shared process-wide (package unique); maps and
// pointers within what one reader decodes (a part, or a format 1 set).
type sharer struct {
	maps    map[string]map[string]string
	retries map[config.Retries]*config.Retries
	notify  map[string]*config.Notify
}

func newSharer() *sharer {
	return &sharer{maps: map[string]map[string]string{}, retries: map[config.Retries]*config.Retries{}, notify: map[string]*config.Notify{}}
}

// share makes j point at the shared copy of each field that has one.
func (s *sharer) share(j *config.Job) {
	j.Schedule = intern(j.Schedule)
	j.Timezone = intern(j.Timezone)
	j.Concurrency = config.Concurrency(intern(string(j.Concurrency)))
	j.Misfire = config.Misfire(intern(string(j.Misfire)))
	if h := j.HTTP; h != nil {
		h.Method = intern(h.Method)
		h.FollowRedirects = config.Redirects(intern(string(h.FollowRedirects)))
		h.Headers = s.strings(h.Headers)
	}
	if e := j.Exec; e != nil {
		e.Dir = intern(e.Dir)
	}
	j.Env = s.strings(j.Env)
	if r := j.Retries; r != nil {
		if c, ok := s.retries[*r]; ok {
			j.Retries = c
		} else {
			s.retries[*r] = r
		}
	}
	if n := j.Notify; n != nil {
		if k, err := json.Marshal(n); err == nil {
			if c, ok := s.notify[string(k)]; ok {
				j.Notify = c
			} else {
				s.notify[string(k)] = n
			}
		}
	}
}

// strings returns the shared map equal to m (m itself the first time).
func (s *sharer) strings(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	var k strings.Builder
	for _, name := range slices.Sorted(maps.Keys(m)) {
		k.WriteString(name)
		k.WriteByte(0)
		k.WriteString(m[name])
		k.WriteByte(0)
	}
	if c, ok := s.maps[k.String()]; ok {
		return c
	}
	s.maps[k.String()] = m
	return m
}

// intern returns the process's one copy of v.
func intern(v string) string {
	if v == "" {
		return v
	}
	return unique.Make(v).Value()
}
