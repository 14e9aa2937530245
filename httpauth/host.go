package httpauth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// HostCheck guards a listener without token auth against DNS rebinding: a
// page whose own name resolves, after it loaded, to the replica's address
// talks to the replica as a same-origin page, but its requests still carry
// the attacker's name in Host. So only the names no attacker controls are
// answered: localhost and *.localhost, IP addresses (loopback ones, the
// listener's own, and any when it listens on every interface, whose
// addresses it cannot list), and the listener's own host name. The open
// paths answer whatever the Host, as they do whatever the credentials.
// A replica meant to be reached under another name gets tokens instead.
func HostCheck(listenAddr string, open []string) func(http.Handler) http.Handler {
	own, _, err := net.SplitHostPort(listenAddr)
	if err != nil {
		own = listenAddr
	}
	ownIP, ipErr := netip.ParseAddr(own)
	anyIP := own == "" || ipErr == nil && ownIP.IsUnspecified()
	allowed := func(host string) bool {
		name := hostName(host)
		if name == "localhost" || strings.HasSuffix(name, ".localhost") {
			return true
		}
		if ip, err := netip.ParseAddr(name); err == nil {
			ip = ip.WithZone("").Unmap()
			return anyIP || ip.IsLoopback() || ipErr == nil && ip == ownIP.WithZone("").Unmap()
		}
		return name != "" && strings.EqualFold(name, strings.TrimSuffix(own, "."))
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slices.Contains(open, r.URL.Path) || allowed(r.Host) {
				next.ServeHTTP(w, r)
				return
			}
			http.Error(w, fmt.Sprintf("Forbidden: Host %q is not this replica's address; without token auth it answers only "+
				"localhost and IP addresses (a defence against DNS rebinding): reach it under another name with tokens "+
				"(--http-read-tokens-file, --http-operate-tokens-file)", r.Host), http.StatusForbidden)
		})
	}
}

// hostName is the lower-case name or address of a Host header, without
// port, brackets or a trailing dot.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
