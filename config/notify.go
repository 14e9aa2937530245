package config

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// NotifyKind is what a notification tells of a job.
type NotifyKind string

const (
	NotifyFailure  NotifyKind = "failure"  // the job has failed `after` runs in a row
	NotifyRecovery NotifyKind = "recovery" // the first success after a failure notification
	NotifySkipped  NotifyKind = "skipped"  // a tick was skipped by policy
)

// Defaults and bounds of notify.
const (
	// DefaultNotifyAfter is how many failed runs in a row make a failure
	// notification when notify sets no after.
	DefaultNotifyAfter = 1
	// MaxNotifyAfter bounds after.
	MaxNotifyAfter = 1000
)

// DefaultNotifyOn are the kinds notified when notify lists none.
var DefaultNotifyOn = []NotifyKind{NotifyFailure, NotifyRecovery}

// Notify says when and where a job's failures are told (docs/notifications.md).
type Notify struct {
	// On lists the kinds to send: failure, recovery, skipped. Default
	// [failure, recovery].
	On []NotifyKind `yaml:"on,omitempty" json:"on,omitempty"`
	// After is how many runs in a row must fail (failed or timed out)
	// before the failure notification: 1 to MaxNotifyAfter (1000);
	// default 1. Further failures send nothing until a success.
	After int `yaml:"after,omitempty" json:"after,omitempty"`
	// Webhook is where notifications are POSTed.
	Webhook *Webhook `yaml:"webhook" json:"webhook,omitempty"`
}

// Wants says whether n sends notifications of kind k.
func (n *Notify) Wants(k NotifyKind) bool { return n != nil && slices.Contains(n.On, k) }

// Webhook is an HTTP endpoint notifications are POSTed to, as JSON. URL,
// header values and Secret may hold ${SHARDCRON_JOB_*} references,
// expanded when a notification is sent.
type Webhook struct {
	// URL is an absolute http:// or https:// URL.
	URL string `yaml:"url" json:"url"`
	// Headers are sent with every notification; Shardcron-* names are
	// reserved.
	Headers map[string]string `yaml:"headers,omitempty" json:"headers,omitempty"`
	// Secret, when set, signs each notification: the header
	// Shardcron-Signature carries an HMAC-SHA256 of its timestamp and body.
	Secret string `yaml:"secret,omitempty" json:"secret,omitempty"`
}

// Defaults is the jobs file's defaults section: what applies to every job
// that does not set it itself. It is applied when the file is parsed; the
// stored job set (and export) holds each job's own copy.
type Defaults struct {
	// Notify is the notify of every job that sets none.
	Notify *Notify `yaml:"notify,omitempty" json:"notify,omitempty"`
}

var (
	notifyFields   = []string{"on", "after", "webhook"}
	webhookFields  = []string{"url", "headers", "secret"}
	defaultsFields = []string{"notify"}
)

// withoutSecrets is n as the API shows it: no webhook, whose URL, headers
// and secret may hold secrets or references to them.
func (n *Notify) withoutSecrets() *Notify {
	if n == nil {
		return nil
	}
	c := *n
	c.Webhook = nil
	return &c
}

// setDefaults fills in on and after.
func (n *Notify) setDefaults() {
	if n == nil {
		return
	}
	if len(n.On) == 0 {
		n.On = slices.Clone(DefaultNotifyOn)
	}
	if n.After == 0 {
		n.After = DefaultNotifyAfter
	}
}

// clone is a deep copy of n, so jobs that inherit a default share nothing.
func (n *Notify) clone() *Notify {
	if n == nil {
		return nil
	}
	c := *n
	c.On = slices.Clone(n.On)
	if n.Webhook != nil {
		w := *n.Webhook
		if n.Webhook.Headers != nil {
			w.Headers = make(map[string]string, len(n.Webhook.Headers))
			for k, v := range n.Webhook.Headers {
				w.Headers[k] = v
			}
		}
		c.Webhook = &w
	}
	return &c
}

func (d *decoder) notify(n *yaml.Node, field string) *Notify {
	out := &Notify{}
	d.mapping(n, field, false, func(key string, k, v *yaml.Node) {
		f := join(field, key)
		switch key {
		case "on":
			on, _ := d.strList(v, f)
			for _, s := range on {
				out.On = append(out.On, NotifyKind(s))
			}
			if v.Kind == yaml.SequenceNode && len(on) == 0 {
				d.errorf(v, f, "lists nothing (omit it for the default, failure and recovery)")
			}
		case "after":
			if a, ok := d.integer(v, f); ok {
				if a == 0 {
					d.errorf(v, f, "must be at least 1 (omit it for the default, %d)", DefaultNotifyAfter)
				}
				out.After = a
			}
		case "webhook":
			out.Webhook = d.webhook(v, f)
		default:
			d.unknown(k, f, notifyFields)
		}
	})
	return out
}

func (d *decoder) webhook(n *yaml.Node, field string) *Webhook {
	w := &Webhook{}
	d.mapping(n, field, false, func(key string, k, v *yaml.Node) {
		f := join(field, key)
		switch key {
		case "url":
			w.URL, _ = d.str(v, f)
		case "headers":
			w.Headers, _ = d.strMap(v, f, true)
		case "secret":
			w.Secret, _ = d.nonEmpty(v, f, "omit it for unsigned notifications")
		default:
			d.unknown(k, f, webhookFields)
		}
	})
	return w
}

// defaults reads the file's defaults section.
func (d *decoder) defaults(n *yaml.Node) *Defaults {
	out := &Defaults{}
	d.mapping(n, "defaults", false, func(key string, k, v *yaml.Node) {
		switch key {
		case "notify":
			out.Notify = d.notify(v, "defaults.notify")
		default:
			d.unknown(k, "defaults."+key, defaultsFields)
		}
	})
	return out
}

// validateNotify checks n, its fields named under field ("notify" or
// "defaults.notify").
func validateNotify(n *Notify, field string, report func(field, msg string, cause error)) {
	if n == nil {
		return
	}
	bad := func(f, format string, args ...any) { report(f, fmt.Sprintf(format, args...), nil) }
	seen := map[NotifyKind]bool{}
	for i, k := range n.On {
		f := fmt.Sprintf("%s.on[%d]", field, i)
		switch {
		case !slices.Contains([]NotifyKind{NotifyFailure, NotifyRecovery, NotifySkipped}, k):
			bad(f, "%q must be one of failure, recovery, skipped", k)
		case seen[k]:
			bad(f, "%q is listed twice", k)
		}
		seen[k] = true
	}
	if n.After < 1 || n.After > MaxNotifyAfter {
		bad(field+".after", "%d is not within 1 to %d", n.After, MaxNotifyAfter)
	}
	w := n.Webhook
	if w == nil {
		bad(field+".webhook", "is required: where notifications are sent")
		return
	}
	wf := field + ".webhook"
	if w.URL == "" {
		bad(wf+".url", "is required")
	} else if checkExpansion(wf+".url", w.URL, false, report) {
		if msg := checkURL(w.URL); msg != "" {
			bad(wf+".url", "%s", msg)
		}
	}
	for _, k := range sortedKeys(w.Headers) {
		f := wf + ".headers." + k
		switch {
		case !isToken(k):
			bad(f, "not a valid header name")
		case strings.HasPrefix(strings.ToLower(k), "shardcron-"):
			bad(f, "Shardcron-* headers are set by shardcron on every notification")
		}
		if strings.ContainsAny(w.Headers[k], "\r\n\x00") {
			bad(f, "a header value holds no line breaks or NUL bytes")
		}
		checkExpansion(f, w.Headers[k], false, report)
	}
	checkExpansion(wf+".secret", w.Secret, false, report)
}

// parseDefaults reads and checks the file's defaults section (n nil: none),
// reporting its problems to c under defaults.*.
func parseDefaults(c *collector, n *yaml.Node) *Defaults {
	if n == nil {
		return &Defaults{}
	}
	d := &decoder{lines: map[string]int{}}
	defs := d.defaults(n)
	defs.Notify.setDefaults()
	validateNotify(defs.Notify, "defaults.notify", func(field, msg string, cause error) {
		if !d.failedUnder(field) {
			d.errs = append(d.errs, &Error{Line: lineOf(d.lines, field, n.Line), Field: field, Msg: msg, Err: cause})
		}
	})
	for _, e := range d.errs {
		c.add(e)
	}
	return defs
}
