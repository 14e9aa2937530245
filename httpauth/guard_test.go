package httpauth

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

const (
	readTok    = "read-token-0123456789"
	operateTok = "operate-token-0123456789"
)

func newGuard(t *testing.T, open []string, log *bytes.Buffer) *Guard {
	t.Helper()
	g, err := New(Config{ReadTokens: []string{readTok}, OperateTokens: []string{"old-operate-token-xyz", operateTok}, Open: open,
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestRolesByMethodAndPath: GET and HEAD need read, every other method on
// every path needs operate (so an endpoint added later is guarded without
// a change here), the openable paths are open only when configured, and
// operate includes read.
func TestRolesByMethodAndPath(t *testing.T) {
	var logs bytes.Buffer
	g := newGuard(t, []string{"/healthz", "/metrics"}, &logs)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := g.Wrap(ok)
	tests := []struct {
		method, path, auth string
		want               int
	}{
		{"GET", "/healthz", "", http.StatusTeapot},
		{"GET", "/metrics", "", http.StatusTeapot},
		{"GET", "/readyz", "", http.StatusUnauthorized}, // not configured open
		{"GET", "/", "", http.StatusUnauthorized},
		{"GET", "/api/v1/state", "Bearer " + readTok, http.StatusTeapot},
		{"HEAD", "/api/v1/jobs", "Bearer " + readTok, http.StatusTeapot},
		{"GET", "/api/v1/jobs/a/runs", "bearer " + operateTok, http.StatusTeapot},
		{"POST", "/api/v1/jobs/a/trigger", "Bearer " + readTok, http.StatusForbidden},
		{"POST", "/api/v1/jobs/a/trigger", "Bearer " + operateTok, http.StatusTeapot},
		{"POST", "/api/v1/jobs/a/trigger", "Bearer old-operate-token-xyz", http.StatusTeapot},
		{"POST", "/api/v2/some/future/endpoint", "Bearer " + readTok, http.StatusForbidden},
		{"DELETE", "/api/v1/nodes/n1/drain", "Bearer " + readTok, http.StatusForbidden},
		{"PUT", "/anything", "", http.StatusUnauthorized},
		{"POST", "/healthz", "", http.StatusTeapot}, // open means open: the handler answers 405 itself
		{"GET", "/api/v1/state", "Bearer " + readTok + "x", http.StatusUnauthorized},
		{"GET", "/api/v1/state", "Bearer", http.StatusUnauthorized},
		{"GET", "/api/v1/state", "Token " + readTok, http.StatusUnauthorized},
	}
	for _, tc := range tests {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s %s %q: %d, want %d", tc.method, tc.path, tc.auth, rec.Code, tc.want)
		}
	}
	// A browser's Basic auth carries the token as the password.
	req := httptest.NewRequest("GET", "/", nil)
	req.SetBasicAuth("anyone", readTok)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusTeapot {
		t.Errorf("Basic auth with a read token: %d", rec.Code)
	}
	// A browser replays Basic credentials by itself, from any page: they
	// never authorize a write, even with an operate token.
	req = httptest.NewRequest("POST", "/api/v1/jobs/a/trigger", nil)
	req.SetBasicAuth("anyone", operateTok)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "Bearer") {
		t.Errorf("Basic auth with an operate token on a write: %d %s", rec.Code, rec.Body)
	}
	// The page asks a browser for its login prompt, the API for a bearer token.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if got := rec.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") {
		t.Errorf("page challenge %q", got)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/state", nil))
	if got := rec.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") {
		t.Errorf("API challenge %q", got)
	}
}

// TestRefusalsCountedAndLoggedWithoutToken: every refusal is counted by
// reason; the log names the request, never the token, and at most one line
// a second reaches it.
func TestRefusalsCountedAndLoggedWithoutToken(t *testing.T) {
	var logs bytes.Buffer
	g := newGuard(t, nil, &logs)
	h := g.Wrap(http.NotFoundHandler())
	send := func(method, auth string) {
		req := httptest.NewRequest(method, "/api/v1/jobs/x/suspend", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	send("POST", "")
	send("POST", "Bearer wrong-guess-marker-55555")
	send("POST", "Bearer "+readTok)
	send("POST", "Bearer "+readTok)
	for reason, want := range map[string]float64{"missing": 1, "invalid": 1, "forbidden": 2} {
		if got := testutil.ToFloat64(g.failures.WithLabelValues(reason)); got != want {
			t.Errorf("failures{reason=%s} = %v, want %v", reason, got, want)
		}
	}
	out := logs.String()
	if strings.Count(out, "http request refused") != 1 || !strings.Contains(out, "path=/api/v1/jobs/x/suspend") {
		t.Errorf("want one refusal line (rate limited) naming the path:\n%s", out)
	}
	for _, secret := range []string{"wrong-guess-marker", readTok, operateTok} {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds a token:\n%s", out)
		}
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("no token: %v", err)
	}
	if _, err := New(Config{ReadTokens: []string{readTok}, Open: []string{"/api/v1/state"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("open API path: %v", err)
	}
}

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "# rotated monthly\n\n  "+readTok+"  \n"+operateTok+"\r\n")
	toks, err := LoadTokens(good)
	if err != nil || len(toks) != 2 || toks[0] != readTok || toks[1] != operateTok {
		t.Fatalf("LoadTokens = %q, %v", toks, err)
	}
	short := write("short", readTok+"\nshort-marker\n")
	for path, want := range map[string]string{
		short:                      short + ":2: a token has at least 16 characters",
		write("empty", "# none\n"): "no token",
		write("space", "a token with-spaces-in-it\n"): "no white space",
		filepath.Join(dir, "missing"):                 "no such file",
	} {
		_, err := LoadTokens(path)
		if !errors.Is(err, ErrTokenFile) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "short-marker") {
			t.Errorf("LoadTokens(%s) = %v, want %q and no token", path, err, want)
		}
	}
}
