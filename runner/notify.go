package runner

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

// The headers a notification carries besides the run identity headers
// (setIdentityHeaders). docs/notifications.md documents them.
const (
	// HeaderNotification is the notification's kind: failure, recovery or
	// skipped.
	HeaderNotification = "Shardcron-Notification"
	// HeaderIdempotencyKey is the same for every send of one
	// notification, re-sends by a new owner included (NotificationKey).
	HeaderIdempotencyKey = "Shardcron-Idempotency-Key"
	// HeaderSignature is "t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
	// "<t>." + body)>", when the webhook has a secret.
	HeaderSignature = "Shardcron-Signature"
)

// notifyAttempts is how often one owner tries a notification the receiver
// did not accept (a network error, 429 or 5xx), within the scheduler's
// notify timeout; notifyBackoff is the wait before the first retry,
// doubled before each later one.
const (
	notifyAttempts = 3
	notifyBackoff  = 500 * time.Millisecond
)

var _ scheduler.Notifier = (*Runner)(nil)

// RunKey is a run's idempotency key as one string: cluster, job, the
// item's name for an item of a sharded job, and tick (FormatTick), which
// the run identity headers carry. item is "" for a job without items.
func RunKey(cluster, job, item string, tick time.Time) string {
	if item == "" {
		return cluster + "/" + job + "/" + FormatTick(tick)
	}
	return cluster + "/" + job + "/" + item + "/" + FormatTick(tick)
}

// NotificationKey is a notification's idempotency key: its run's key and
// its kind. No two notifications share it, and a re-send keeps it.
func NotificationKey(cluster, job, item string, tick time.Time, kind config.NotifyKind) string {
	return RunKey(cluster, job, item, tick) + "/" + string(kind)
}

// NotificationBody is the JSON a webhook receives.
type NotificationBody struct {
	Cluster  string            `json:"cluster"`
	Job      string            `json:"job"`
	Item     *NotificationItem `json:"item,omitempty"` // a sharded job's item; absent otherwise
	Tick     string            `json:"tick"`           // RFC 3339, UTC (FormatTick)
	Kind     config.NotifyKind `json:"kind"`
	Status   scheduler.Status  `json:"status"` // the outcome that decided it
	Attempts int               `json:"attempts,omitempty"`
	Detail   string            `json:"detail,omitempty"`
	// ConsecutiveFailures: runs in a row that failed; for a recovery, the
	// failures it ends.
	ConsecutiveFailures int64  `json:"consecutive_failures"`
	Node                string `json:"node"`
	Shard               int    `json:"shard"`
	Token               int64  `json:"fencing_token"`
	Rerun               bool   `json:"rerun,omitempty"`
	// History is the path of the job's run history on any replica's HTTP
	// address.
	History string `json:"history"`
}

// NotificationItem is the item of a sharded job a notification is about,
// as its run's Shardcron-Item, -Items and -Item-Name headers say it.
type NotificationItem struct {
	Index int    `json:"index"`
	Items int    `json:"items"`
	Name  string `json:"name"`
}

// Sign returns the Shardcron-Signature value of body, sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Notify POSTs n to its job's webhook: it implements scheduler.Notifier. A
// refused or unreachable receiver is tried again, up to notifyAttempts,
// while ctx and n.Deadline allow. No expanded secret appears in its error.
func (rn *Runner) Notify(ctx context.Context, n scheduler.Notification) error {
	if !rn.enter() {
		return ErrClosed
	}
	defer rn.runs.Done()
	var rd redactor
	err := rn.notify(ctx, n, &rd)
	if err != nil {
		return errors.New(rd.apply(err.Error()))
	}
	return nil
}

func (rn *Runner) notify(ctx context.Context, n scheduler.Notification, rd *redactor) error {
	if n.Job.Notify == nil || n.Job.Notify.Webhook == nil {
		return errors.New("job has no notify webhook")
	}
	w := n.Job.Notify.Webhook
	// The webhook names no item (config refuses it): the server's env only.
	expand := func(s string) (string, error) { return rd.expand(s, rn.lookup(config.Item{})) }
	target, err := expand(w.URL)
	if err != nil {
		return fmt.Errorf("url: %v", err)
	}
	secret, err := expand(w.Secret)
	if err != nil {
		return fmt.Errorf("secret: %v", err)
	}
	body, err := json.Marshal(notificationBody(n))
	if err != nil {
		return err
	}
	delay := notifyBackoff
	for attempt := 1; ; attempt++ {
		retry, err := rn.postNotification(ctx, n, target, secret, body, expand)
		if err == nil || !retry || attempt == notifyAttempts {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%v; not retried: %v", err, context.Cause(ctx))
		case <-t.C:
		}
		delay *= 2
	}
}

// notificationBody is n as its webhook receives it.
func notificationBody(n scheduler.Notification) NotificationBody {
	var item *NotificationItem
	history := "/api/v1/jobs/" + url.PathEscape(n.Job.Name) + "/runs"
	if !n.Item.IsZero() {
		item = &NotificationItem{Index: n.Item.Index, Items: n.Item.Count, Name: n.Item.Name}
		history += "?item=" + url.QueryEscape(n.Item.Name) // the item's own runs
	}
	return NotificationBody{Item: item,
		Cluster: n.Cluster, Job: n.Job.Name, Tick: FormatTick(n.Tick), Kind: n.Kind,
		Status: n.Status, Attempts: n.Attempts, Detail: n.Detail, ConsecutiveFailures: n.Failures,
		Node: n.Node, Shard: n.Shard, Token: n.Token, Rerun: n.Rerun,
		History: history,
	}
}

// postNotification sends one attempt, reading the safe deadline right
// before. retry says whether another attempt may succeed.
func (rn *Runner) postNotification(ctx context.Context, n scheduler.Notification, target, secret string, body []byte, expand func(string) (string, error)) (retry bool, err error) {
	hr := &httpRun{deadline: n.Deadline, follow: config.RedirectsNone}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, httpRunKey{}, hr), http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("request: %v", err)
	}
	if err := setNotificationHeaders(req.Header, n, expand); err != nil {
		return false, err
	}
	if secret != "" {
		req.Header.Set(HeaderSignature, Sign(secret, time.Now(), body))
	}
	if n.Deadline != nil && n.Deadline.Remaining() <= 0 {
		return false, errors.New("safe deadline passed: notification not sent")
	}
	if ctx.Err() != nil {
		return false, fmt.Errorf("notification not sent: %v", context.Cause(ctx))
	}
	resp, err := rn.client.Do(req)
	if err != nil {
		return ctx.Err() == nil, fmt.Errorf("request: %v", err)
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainBytes)
	_ = resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	retry = resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
	return retry, fmt.Errorf("HTTP %s", resp.Status)
}

// setNotificationHeaders sets the webhook's own headers (expanded), then
// the run identity, the kind and the idempotency key, which no webhook
// header can replace.
func setNotificationHeaders(h http.Header, n scheduler.Notification, expand func(string) (string, error)) error {
	for _, k := range slices.Sorted(maps.Keys(n.Job.Notify.Webhook.Headers)) {
		v, err := expand(n.Job.Notify.Webhook.Headers[k])
		if err != nil {
			return fmt.Errorf("header %s: %v", k, err)
		}
		h.Set(k, v)
	}
	if h.Get("User-Agent") == "" {
		h.Set("User-Agent", "shardcron")
	}
	h.Set("Content-Type", "application/json")
	for k := range h {
		if strings.HasPrefix(k, "Shardcron-") {
			delete(h, k) // validation refuses them; a job built in code may not
		}
	}
	setIdentityHeaders(h, scheduler.Run{Cluster: n.Cluster, Node: n.Node, Job: n.Job, Item: n.Item, Tick: n.Tick,
		Shard: n.Shard, Token: n.Token, Rerun: n.Rerun})
	h.Set(HeaderNotification, string(n.Kind))
	h.Set(HeaderIdempotencyKey, NotificationKey(n.Cluster, n.Job.Name, n.Item.Name, n.Tick, n.Kind))
	return nil
}
