package docs

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink matches an inline Markdown link or image: its target, up to a
// closing parenthesis or a title.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// markdownFiles returns every Markdown file of the repository, outside
// build output and modules' caches.
func markdownFiles(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	return files, err
}

// outsideFences calls f with each line of text that is not inside a fenced
// code block, and its line number.
func outsideFences(text string, f func(n int, line string)) {
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			f(i+1, line)
		}
	}
}

// slug is the anchor GitHub gives a heading: lower case, letters, digits,
// spaces, hyphens and underscores kept, spaces turned into hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of text's headings, numbered as GitHub does
// when a heading repeats (name, name-1, ...).
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	outsideFences(text, func(_ int, line string) {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			return
		}
		s := slug(title)
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	})
	return out
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Delivery semantics — what a receiver should do": "delivery-semantics--what-a-receiver-should-do",
		"`func:` jobs":                "func-jobs",
		"Manual runs: `trigger`":      "manual-runs-trigger",
		"How it works, for operators": "how-it-works-for-operators",
		"Policies, exactly":           "policies-exactly",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLinksResolve checks every relative link of every Markdown file: the
// file it names exists and, for a #fragment into Markdown, the heading
// does too. So moving a section cannot leave a link behind.
func TestLinksResolve(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := markdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(string(data))
		return cache[path], nil
	}
	checked := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		outsideFences(string(data), func(n int, line string) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				if err := checkLink(file, target, anchorsOf); err != nil {
					t.Errorf("%s:%d: link %q: %v", rel, n, target, err)
				}
			}
		})
	}
	if checked == 0 {
		t.Fatal("no relative link found: the scan is broken")
	}
}

// checkLink resolves target relative to the file that holds it.
func checkLink(file, target string, anchorsOf func(string) (map[string]bool, error)) error {
	path, frag, _ := strings.Cut(target, "#")
	dest := file
	if path != "" {
		dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
		if _, err := os.Stat(dest); err != nil {
			return err
		}
	}
	if frag == "" || !strings.HasSuffix(dest, ".md") {
		return nil
	}
	a, err := anchorsOf(dest)
	if err != nil {
		return err
	}
	if !a[frag] {
		return fmt.Errorf("no heading with the anchor #%s", frag)
	}
	return nil
}
