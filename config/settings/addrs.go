package settings

// The checks of the addresses and URLs the node's settings carry, and
// their parsed forms.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// CheckAdvertiseAddr says whether addr is an address others can dial:
// host:port with a host that is not empty or unspecified (0.0.0.0, ::),
// and a port from 1 to 65535.
func CheckAdvertiseAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("not host:port (such as shardcron-1:8080 or 10.0.0.7:8080)")
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("the host must be one others can reach, not empty or %q", host)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("the port must be a number from 1 to 65535")
	}
	return nil
}

// ParsePrefix parses a network as egress_deny and egress_allow take it: a
// CIDR, or a single address (a /32 or /128).
func ParsePrefix(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	return p.Masked(), err
}

// EgressPrefixes returns EgressDeny and EgressAllow parsed (Validate has
// checked them; an entry that does not parse is left out).
func (n Node) EgressPrefixes() (deny, allow []netip.Prefix) {
	parse := func(list []string) []netip.Prefix {
		var out []netip.Prefix
		for _, c := range list {
			if p, err := ParsePrefix(c); err == nil {
				out = append(out, p)
			}
		}
		return out
	}
	return parse(n.EgressDeny), parse(n.EgressAllow)
}

// TraceID is what {trace_id} stands for in TraceUIURL.
const TraceID = "{trace_id}"

// CheckTraceUIURL checks a trace UI URL template: "" (no links), or an
// absolute http or https URL holding {trace_id}, which stays a URL with a
// trace id in its place.
func CheckTraceUIURL(s string) error {
	if s == "" {
		return nil
	}
	if !strings.Contains(s, TraceID) {
		return fmt.Errorf("holds no %s to stand for the trace id (such as https://jaeger.example/trace/%s)", TraceID, TraceID)
	}
	u, err := url.Parse(strings.ReplaceAll(s, TraceID, "0af7651916cd43dd8448eb211c80319c"))
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an absolute http:// or https:// URL")
	}
	return nil
}
