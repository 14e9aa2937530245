package runner

import (
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// DefaultEgressDeny are the networks no http job reaches unless
// EgressPolicy.Allow names them: link-local (where every cloud's instance
// metadata and its credentials live), the metadata addresses outside it,
// and "this host" (0.0.0.0 and :: reach the host's own listeners).
// Loopback is not among them: `make run` and the tests use loopback
// targets. Deny it with --egress-deny 127.0.0.0/8,::1/128.
var DefaultEgressDeny = []netip.Prefix{
	netip.MustParsePrefix("169.254.0.0/16"),     // link-local, AWS/GCP/Azure/OpenStack metadata
	netip.MustParsePrefix("fe80::/10"),          // link-local
	netip.MustParsePrefix("fd00:ec2::254/128"),  // AWS metadata over IPv6
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("0.0.0.0/8"),          // this host
	netip.MustParsePrefix("::/128"),             // this host
}

// EgressPolicy says which addresses http jobs may connect to. It is
// checked when each connection is dialled, on the resolved address, so it
// holds for every redirect and whatever a name resolves to at that moment
// (DNS rebinding). Through an HTTP proxy (HTTP_PROXY, HTTPS_PROXY) the
// address dialled is the proxy's: the proxy must enforce its own rules.
type EgressPolicy struct {
	// Deny lists networks jobs may not reach (--egress-deny), on top of
	// DefaultEgressDeny.
	Deny []netip.Prefix
	// Allow lists networks jobs may reach although a Deny entry (or a
	// default) covers them (--egress-allow). Of the entries that contain
	// an address, the longest prefix decides; an allow wins a tie.
	Allow []netip.Prefix
}

// check returns nil when addr may be dialled, else ErrEgressRefused naming
// the prefix that denies it.
func (p EgressPolicy) check(addr netip.Addr) error {
	addr = addr.Unmap()
	deny, denied := longest(addr, DefaultEgressDeny, p.Deny)
	allow, allowed := longest(addr, p.Allow)
	if !denied || (allowed && allow.Bits() >= deny.Bits()) {
		return nil
	}
	return fmt.Errorf("%w: %s is in %s", ErrEgressRefused, addr, deny)
}

// longest returns the longest prefix among lists that contains addr.
func longest(addr netip.Addr, lists ...[]netip.Prefix) (best netip.Prefix, found bool) {
	for _, l := range lists {
		for _, p := range l {
			if p.Contains(addr) && (!found || p.Bits() > best.Bits()) {
				best, found = p, true
			}
		}
	}
	return best, found
}

// control is the dialer's Control: it runs after name resolution, with
// the address about to be connected to.
func (p EgressPolicy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check %q: %v", ErrEgressRefused, address, err)
	}
	return p.check(ap.Addr())
}

// dialer is net/http's default dialer with the egress check.
func (p EgressPolicy) dialer() *net.Dialer {
	return &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}
}
