package httpauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Role is what a token may do, and what a request needs.
type Role int

// Roles, each including the ones before it.
const (
	Open    Role = iota // no token needed
	Read                // GET and HEAD
	Operate             // everything else
)

func (r Role) String() string {
	switch r {
	case Open:
		return "open"
	case Read:
		return "read"
	case Operate:
		return "operate"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// OpenablePaths are the paths Config.Open may leave without a token.
var OpenablePaths = []string{"/healthz", "/readyz", "/metrics"}

// Config says which tokens hold which role and what stays open.
type Config struct {
	// ReadTokens may read; OperateTokens may read and operate. At least one
	// token in all.
	ReadTokens, OperateTokens []string
	// Open lists paths (of OpenablePaths) served to anyone, with any
	// method the handler accepts there.
	Open []string
	// Logger receives refusals (never the token); nil discards.
	Logger *slog.Logger
}

// Guard is the middleware. It is safe for concurrent use.
type Guard struct {
	tokens   []token
	open     map[string]bool
	log      *slog.Logger
	failures *prometheus.CounterVec

	logMu      sync.Mutex
	lastLog    time.Time
	suppressed int
}

type token struct {
	digest [sha256.Size]byte
	role   Role
}

// New validates cfg and returns a Guard.
func New(cfg Config) (*Guard, error) {
	g := &Guard{open: map[string]bool{}, log: cfg.Logger}
	if g.log == nil {
		g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for _, t := range cfg.ReadTokens {
		g.tokens = append(g.tokens, token{sha256.Sum256([]byte(t)), Read})
	}
	for _, t := range cfg.OperateTokens {
		g.tokens = append(g.tokens, token{sha256.Sum256([]byte(t)), Operate})
	}
	if len(g.tokens) == 0 {
		return nil, fmt.Errorf("%w: no token", ErrInvalidConfig)
	}
	for _, p := range cfg.Open {
		if !slices.Contains(OpenablePaths, p) {
			return nil, fmt.Errorf("%w: %q cannot be left open (only %s)", ErrInvalidConfig, p, strings.Join(OpenablePaths, ", "))
		}
		g.open[p] = true
	}
	g.failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "shardcron_http_auth_failures_total",
		Help: "HTTP requests refused by token auth, by reason: missing (no token), invalid (no such token), forbidden (a read token on an operate request).",
	}, []string{"reason"})
	for _, r := range []string{"missing", "invalid", "forbidden"} {
		g.failures.WithLabelValues(r)
	}
	return g, nil
}

// Describe and Collect make the Guard's metric registrable on the
// replica's registry, which is built after the HTTP server starts.
func (g *Guard) Describe(ch chan<- *prometheus.Desc) { g.failures.Describe(ch) }

// Collect implements prometheus.Collector.
func (g *Guard) Collect(ch chan<- prometheus.Metric) { g.failures.Collect(ch) }

// Required is the role a request needs: Open for an open path, Read for
// GET and HEAD, Operate for every other method on every path.
func (g *Guard) Required(r *http.Request) Role {
	if g.open[r.URL.Path] {
		return Open
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return Read
	}
	return Operate
}

// Wrap returns next behind the guard.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		need := g.Required(r)
		if need == Open {
			next.ServeHTTP(w, r)
			return
		}
		presented, ok := credential(r, need)
		if !ok {
			g.refuse(w, r, need, "missing", http.StatusUnauthorized)
			return
		}
		switch has := g.role(presented); {
		case has == Open:
			g.refuse(w, r, need, "invalid", http.StatusUnauthorized)
		case has < need:
			g.refuse(w, r, need, "forbidden", http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// credential is the token of a Bearer Authorization header, or for a read
// the password of a Basic one. A browser replays Basic credentials by
// itself on every request to the origin, whichever page started it, so
// they never authorize a write: a write carries its bearer token
// explicitly.
func credential(r *http.Request, need Role) (string, bool) {
	h := r.Header.Get("Authorization")
	if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
		tok = strings.TrimSpace(tok)
		return tok, tok != ""
	}
	if _, pw, ok := r.BasicAuth(); ok && pw != "" && need <= Read {
		return pw, true
	}
	return "", false
}

// role compares the presented token with every configured one, in constant
// time, and returns the highest role it holds (Open for none).
func (g *Guard) role(presented string) Role {
	d := sha256.Sum256([]byte(presented))
	best := Open
	for _, t := range g.tokens {
		if subtle.ConstantTimeCompare(d[:], t.digest[:]) == 1 {
			best = max(best, t.role)
		}
	}
	return best
}

func (g *Guard) refuse(w http.ResponseWriter, r *http.Request, need Role, reason string, status int) {
	g.failures.WithLabelValues(reason).Inc()
	g.logRefusal(r, need, reason)
	if status == http.StatusUnauthorized {
		// A browser asking for the page gets its login prompt (the token
		// as the password); API clients are told to send a bearer token.
		if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") {
			w.Header().Set("WWW-Authenticate", `Basic realm="shardcron", charset="UTF-8"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="shardcron"`)
		}
	}
	msg := fmt.Sprintf("%s: this request needs a token with the %s role", http.StatusText(status), need)
	if need == Operate {
		msg += " (Authorization: Bearer TOKEN; Basic credentials never authorize a write)"
	}
	http.Error(w, msg, status)
}

// logRefusal logs at most one refusal a second, so that a flood of guesses
// cannot flood the log; the next line says how many were not logged.
func (g *Guard) logRefusal(r *http.Request, need Role, reason string) {
	g.logMu.Lock()
	now := time.Now()
	if now.Sub(g.lastLog) < time.Second {
		g.suppressed++
		g.logMu.Unlock()
		return
	}
	suppressed := g.suppressed
	g.lastLog, g.suppressed = now, 0
	g.logMu.Unlock()
	g.log.Warn("http request refused", "reason", reason, "needs", need.String(),
		"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "not_logged_before", suppressed)
}
