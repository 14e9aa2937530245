package httpauth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadTokensRefusesWeak: the tokens the example overlay once shipped,
// placeholders and tokens of a few repeated characters are refused at load,
// by file and line, without the token in the error.
func TestLoadTokensRefusesWeak(t *testing.T) {
	dir := t.TempDir()
	for i, tok := range []string{
		"example-operate-token-replace-me",
		"example-read-token-replace-me",
		"my-api-token-CHANGEME-please",
		"replace-this-with-a-real-one",
		"aaaaaaaaaaaaaaaaaaaaaaaa",
		"abababababababababab",
		"1234123412341234",
	} {
		path := filepath.Join(dir, "tokens")
		if err := os.WriteFile(path, []byte(readTok+"\n# comment\n"+tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadTokens(path)
		if !errors.Is(err, ErrTokenFile) || !strings.Contains(err.Error(), path+":3:") || strings.Contains(err.Error(), tok) {
			t.Errorf("%d: LoadTokens with a weak token = %v, want ErrTokenFile naming %s:3 and not the token", i, err, path)
		}
	}
	// Random tokens and the suite's own test tokens load.
	path := filepath.Join(dir, "good")
	good := "q7Vd0m2X9cR+Kf3uW8yZ1aBn5sLe4tHg6jPo0iUx2wE="
	if err := os.WriteFile(path, []byte(good+"\n"+readTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if toks, err := LoadTokens(path); err != nil || len(toks) != 2 {
		t.Errorf("LoadTokens(strong tokens) = %d tokens, %v", len(toks), err)
	}
}

// TestWeakTokensFile: every line of the shared list of known example
// tokens is itself refused (deploy/kubernetes/check reads the same file).
func TestWeakTokensFile(t *testing.T) {
	known := KnownExampleTokens()
	if len(known) == 0 {
		t.Fatal("no known example token")
	}
	for _, tok := range known {
		if WeakToken(tok) == "" {
			t.Errorf("known example token %q is not refused", tok)
		}
	}
}
