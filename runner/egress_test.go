package runner

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/shardcron/shardcron/config"
	"github.com/shardcron/shardcron/scheduler"
)

func prefixes(t *testing.T, ps ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, p := range ps {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestEgressPolicyAllows(t *testing.T) {
	def := EgressPolicy{}
	custom := EgressPolicy{Deny: prefixes(t, "127.0.0.0/8", "10.0.0.0/8"), Allow: prefixes(t, "10.1.0.0/16", "169.254.169.254/32")}
	for _, tc := range []struct {
		policy EgressPolicy
		addr   string
		denied string // the prefix that denies it; "" for allowed
	}{
		{def, "169.254.169.254", "169.254.0.0/16"},
		{def, "::ffff:169.254.169.254", "169.254.0.0/16"}, // IPv4-mapped
		{def, "fd00:ec2::254", "fd00:ec2::254/128"},
		{def, "fe80::1", "fe80::/10"},
		{def, "100.100.100.200", "100.100.100.200/32"},
		{def, "0.0.0.0", "0.0.0.0/8"},
		{def, "127.0.0.1", ""}, // loopback stays reachable by default
		{def, "::1", ""},
		{def, "10.2.3.4", ""},
		{custom, "127.0.0.1", "127.0.0.0/8"},
		{custom, "10.2.3.4", "10.0.0.0/8"},
		{custom, "10.1.2.3", ""},        // a more specific allow wins
		{custom, "169.254.169.254", ""}, // an explicit allow of the default deny
		{custom, "169.254.1.1", "169.254.0.0/16"},
	} {
		err := tc.policy.check(netip.MustParseAddr(tc.addr))
		switch {
		case tc.denied == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.addr, err)
		case tc.denied != "" && (!errors.Is(err, ErrEgressRefused) || !strings.Contains(err.Error(), tc.denied)):
			t.Errorf("%s: got %v, want refused by %s", tc.addr, err, tc.denied)
		}
	}
}

// TestEgressCheckedAtDial: the check is on the address dialled, after DNS
// and on every redirect: the metadata address is refused by default, a
// name resolving to a denied address is refused, and a redirect to a
// denied address never connects.
func TestEgressCheckedAtDial(t *testing.T) {
	denied, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	hidden := &receiver{}
	hidden.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hidden.mu.Lock()
		hidden.reqs = append(hidden.reqs, r)
		hidden.mu.Unlock()
	}))
	hidden.Listener.Close()
	hidden.Listener = denied
	hidden.Start()
	defer hidden.Close()
	front := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, hidden.URL+"/internal", http.StatusFound)
	})
	rn := newRunner(t, func(c *Config) { c.Egress = EgressPolicy{Deny: prefixes(t, "127.0.0.2/32")} })
	for _, tc := range []struct{ url, want string }{
		{"http://169.254.169.254/latest/meta-data/", "169.254.0.0/16"},
		{front.URL + "/start", "127.0.0.2/32"},
		{hidden.URL + "/direct", "127.0.0.2/32"},
	} {
		job := redirectJob(tc.url, config.RedirectsAny)
		job.Timeout = config.Duration(5 * time.Second)
		res := rn.Run(context.Background(), testRun(job, slidingDeadline{time.Minute}))
		if res.Status != scheduler.StatusFailed || !strings.Contains(res.Detail, ErrEgressRefused.Error()) || !strings.Contains(res.Detail, tc.want) {
			t.Errorf("%s: %s (%s), want refused by %s", tc.url, res.Status, res.Detail, tc.want)
		}
	}
	if reqs, _ := hidden.requests(); len(reqs) != 0 {
		t.Errorf("%d requests reached the denied address", len(reqs))
	}
	// A name is checked by the address it resolves to.
	local := newRunner(t, func(c *Config) { c.Egress = EgressPolicy{Deny: prefixes(t, "127.0.0.0/8", "::1/128")} })
	job := httpJob(otherHost(front) + "/by-name")
	res := local.Run(context.Background(), testRun(job, slidingDeadline{time.Minute}))
	if res.Status != scheduler.StatusFailed || !strings.Contains(res.Detail, ErrEgressRefused.Error()) {
		t.Errorf("localhost with loopback denied: %s (%s)", res.Status, res.Detail)
	}
}
