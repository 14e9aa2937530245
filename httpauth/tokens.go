package httpauth

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// MinTokenLength is the shortest token accepted: a bearer token is a
// password that a script, not a person, types, so it can be long.
const MinTokenLength = 16

// maxTokenFile bounds a token file.
const maxTokenFile = 1 << 20

// LoadTokens reads a token file: one token per line; blank lines and lines
// starting with # are skipped, surrounding white space is trimmed. Several
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
