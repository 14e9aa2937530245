package httpauth

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHostCheck: a listener without tokens answers loopback names, IP
// addresses it can be reached at and its own name; any other name (a page
// that rebound its own name to the replica's address) is refused, except
// on the open paths.
func TestHostCheck(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	tests := []struct {
		listen, path, host string
		want               int
	}{
		{"127.0.0.1:8080", "/api/v1/state", "127.0.0.1:8080", http.StatusTeapot},
		{"127.0.0.1:8080", "/api/v1/state", "127.0.0.2", http.StatusTeapot},
		{"127.0.0.1:8080", "/api/v1/state", "localhost:8080", http.StatusTeapot},
		{"127.0.0.1:8080", "/api/v1/state", "LOCALHOST.:8080", http.StatusTeapot},
		{"127.0.0.1:8080", "/", "app.localhost:8080", http.StatusTeapot},
		{"127.0.0.1:8080", "/", "[::1]:8080", http.StatusTeapot},
		{"127.0.0.1:8080", "/", "[::ffff:127.0.0.1]:8080", http.StatusTeapot},
		{"127.0.0.1:8080", "/", "evil.example:8080", http.StatusForbidden},
		{"127.0.0.1:8080", "/", "evil.example", http.StatusForbidden},
		{"127.0.0.1:8080", "/", "localhost.evil.example", http.StatusForbidden},
		{"127.0.0.1:8080", "/", "", http.StatusForbidden},
		{"127.0.0.1:8080", "/", "10.0.0.7:8080", http.StatusForbidden}, // not an address it listens on
		{"127.0.0.1:8080", "/healthz", "evil.example", http.StatusTeapot},
		{"127.0.0.1:8080", "/metrics", "evil.example", http.StatusForbidden}, // not open here
		{"10.0.0.7:8080", "/", "10.0.0.7:8080", http.StatusTeapot},
		{"10.0.0.7:8080", "/", "10.0.0.8:8080", http.StatusForbidden},
		{":8080", "/", "10.0.0.8:8080", http.StatusTeapot}, // every interface: any address
		{"0.0.0.0:8080", "/", "[fd00::1]:8080", http.StatusTeapot},
		{":8080", "/", "replica.internal:8080", http.StatusForbidden},
		{"replica.internal:8080", "/", "Replica.Internal:8080", http.StatusTeapot},
		{"replica.internal:8080", "/", "other.internal:8080", http.StatusForbidden},
	}
	for _, tc := range tests {
		h := HostCheck(tc.listen, []string{"/healthz"})(ok)
		req := httptest.NewRequest("GET", tc.path, nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("listen %s, %s Host %q: %d, want %d", tc.listen, tc.path, tc.host, rec.Code, tc.want)
		}
	}
}
