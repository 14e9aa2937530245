package httpauth

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"os"
	"strings"
)

// MinTokenLength is the shortest token accepted: a bearer token is a
// password that a script, not a person, types, so it can be long.
const MinTokenLength = 16

// minDistinct is the fewest different characters a token has: fewer is
// a typed pattern (aaaa…, 1234 1234…), not a random token.
const minDistinct = 8

// placeholders are words of a token someone was told to replace.
var placeholders = []string{"example", "replace", "changeme", "change-me", "change_me", "placeholder"}

//go:embed example-tokens.txt
var exampleTokens string

// KnownExampleTokens returns the tokens published as examples, which
// LoadTokens refuses (example-tokens.txt, read by deploy/kubernetes/check
// as well).
func KnownExampleTokens() []string {
	var out []string
	for line := range strings.Lines(exampleTokens) {
		if tok := strings.TrimSpace(line); tok != "" && !strings.HasPrefix(tok, "#") {
			out = append(out, tok)
		}
	}
	return out
}

// WeakToken says why tok is an obviously weak token ("" when it is not): a
// published example, a placeholder, or too few different characters. It
// never repeats the token.
func WeakToken(tok string) string {
	for _, ex := range KnownExampleTokens() {
		if tok == ex {
			return "a published example token: generate your own (head -c 32 /dev/urandom | base64)"
		}
	}
	lower := strings.ToLower(tok)
	for _, p := range placeholders {
		if strings.Contains(lower, p) {
			return fmt.Sprintf("a placeholder (it says %q): generate a token (head -c 32 /dev/urandom | base64)", p)
		}
	}
	distinct := map[rune]bool{}
	for _, r := range tok {
		distinct[r] = true
	}
	if len(distinct) < minDistinct {
		return fmt.Sprintf("fewer than %d different characters: generate a token (head -c 32 /dev/urandom | base64)", minDistinct)
	}
	return ""
}

// maxTokenFile bounds a token file.
const maxTokenFile = 1 << 20

// LoadTokens reads a token file: one token per line; blank lines and lines
// starting with # are skipped, surrounding white space is trimmed; a weak
// token (WeakToken) is refused. Several
// tokens let a token be rotated without a moment in which neither the old
// nor the new one works.
func LoadTokens(path string) ([]string, error) {
	b, err := readBounded(path, maxTokenFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokenFile, err)
	}
	if len(b) > maxTokenFile {
		return nil, fmt.Errorf("%w: %s: more than %d bytes", ErrTokenFile, path, maxTokenFile)
	}
	var tokens []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxTokenFile)
	for line := 1; sc.Scan(); line++ {
		tok := strings.TrimSpace(sc.Text())
		switch {
		case tok == "" || strings.HasPrefix(tok, "#"):
			continue
		case len(tok) < MinTokenLength:
			return nil, fmt.Errorf("%w: %s:%d: a token has at least %d characters", ErrTokenFile, path, line, MinTokenLength)
		case strings.ContainsAny(tok, " \t"):
			return nil, fmt.Errorf("%w: %s:%d: a token holds no white space", ErrTokenFile, path, line)
		}
		if why := WeakToken(tok); why != "" {
			return nil, fmt.Errorf("%w: %s:%d: weak token: %s", ErrTokenFile, path, line, why)
		}
		tokens = append(tokens, tok)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrTokenFile, path, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: %s: no token", ErrTokenFile, path)
	}
	return tokens, nil
}

// readBounded reads at most max+1 bytes of path: enough to tell a file
// over the bound without reading all of it (a huge file, /dev/zero).
func readBounded(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(max)+1))
}
