package replica

import (
	"errors"
	"testing"
)

// A member's address is one a user can reach: never the unspecified
// address the listener bound.
func TestAdvertised(t *testing.T) {
	host := func() (string, error) { return "shardcron-1", nil }
	noHost := func() (string, error) { return "", errors.New("no host name") }
	for _, tc := range []struct {
		configured, bound string
		hostname          func() (string, error)
		want              string
	}{
		{"", "[::]:8080", host, "shardcron-1:8080"},
		{"", "0.0.0.0:9090", host, "shardcron-1:9090"},
		{"", ":8080", host, "shardcron-1:8080"},
		{"", "127.0.0.1:8080", host, "127.0.0.1:8080"},
		{"", "[fd00::7]:8080", host, "[fd00::7]:8080"},
		{"", "[::]:8080", noHost, "[::]:8080"},
		{"cron.example:443", "[::]:8080", host, "cron.example:443"},
	} {
		if got := advertised(tc.configured, tc.bound, tc.hostname); got != tc.want {
			t.Errorf("advertised(%q, %q) = %q, want %q", tc.configured, tc.bound, got, tc.want)
		}
	}
}
