package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestNotifyDefaultsApplyToJobsWithoutTheirOwn(t *testing.T) {
	jobs, err := ParseJobs("jobs.yaml", []byte(`defaults:
  notify:
    after: 3
    webhook: {url: "http://hooks.internal/", secret: "${SHARDCRON_JOB_HOOK_SECRET}"}
jobs:
  - {name: a, schedule: "@hourly", http: {url: "http://x.internal/"}}
  - name: b
    schedule: "@hourly"
    http: {url: "http://x.internal/"}
    notify: {on: [skipped], webhook: {url: "http://other.internal/"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	wantA := &Notify{On: []NotifyKind{NotifyFailure, NotifyRecovery}, After: 3,
		Webhook: &Webhook{URL: "http://hooks.internal/", Secret: "${SHARDCRON_JOB_HOOK_SECRET}"}}
	if !reflect.DeepEqual(jobs[0].Notify, wantA) {
		t.Errorf("a inherits %+v, want %+v", jobs[0].Notify, wantA)
	}
	wantB := &Notify{On: []NotifyKind{NotifySkipped}, After: 1, Webhook: &Webhook{URL: "http://other.internal/"}}
	if !reflect.DeepEqual(jobs[1].Notify, wantB) {
		t.Errorf("b's own notify %+v, want %+v", jobs[1].Notify, wantB)
	}
	if !jobs[1].Notify.Wants(NotifySkipped) || jobs[1].Notify.Wants(NotifyFailure) {
		t.Error("Wants disagrees with on")
	}
}

// TestNotifyWebhookNeverShown: the API's view of a job has no webhook (its
// URL, headers and secret), and the job itself keeps it.
func TestNotifyWebhookNeverShown(t *testing.T) {
	j := Job{Name: "a", Notify: &Notify{On: DefaultNotifyOn, After: 2,
		Webhook: &Webhook{URL: "http://h/?k=s3cret-url", Headers: map[string]string{"X-K": "s3cret-header"}, Secret: "s3cret-key"}}}
	b, err := json.Marshal(j.WithoutTarget())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cret") || strings.Contains(string(b), "webhook") {
		t.Fatalf("shown: %s", b)
	}
	if !strings.Contains(string(b), `"after":2`) {
		t.Fatalf("notify's policy not shown: %s", b)
	}
	if j.Notify.Webhook == nil {
		t.Fatal("WithoutTarget changed the job it was called on")
	}
}
