package replica

import (
	"net"
	"os"
)

// advertised is the address published in the member key: configured when
// set (config.CheckAdvertiseAddr validated it), else the bound address with
// an unspecified host (":8080" binds "[::]:8080") replaced by the host name,
// which peers on the same network resolve (a compose service, a pod). When
// the host name cannot be read the bound address is all there is.
func advertised(configured, bound string, hostname func() (string, error)) string {
	if configured != "" {
		return configured
	}
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return bound
	}
	name, err := hostname()
	if err != nil || name == "" {
		return bound
	}
	return net.JoinHostPort(name, port)
}

// advertiseAddr is this replica's advertised address.
func (r *Replica) advertiseAddr(bound string) string {
	return advertised(r.cfg.AdvertiseAddr, bound, os.Hostname)
}
