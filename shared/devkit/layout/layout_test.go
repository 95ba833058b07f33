package layout_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

const module = "github.com/sas-go/sas"

// root is the module's directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test")
		dir = parent
	}
}

type pkg struct {
	ImportPath string
	Deps       []string
}

// packages lists the module's packages with what their code (not their
// tests) imports, directly or not.
func packages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps", "./...")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// tooling is the local tooling: the CLI, and what makes the emulated
// pipeline (shared/devkit). Everything else is the product, deployed.
func tooling(path string) bool {
	return strings.HasPrefix(path, module+"/shared/devkit/") || strings.HasPrefix(path, module+"/cmd/")
}

// The product (the functions, shared/ outside devkit, infra) never imports
// the tooling: what is deployed does not depend on the emulators, the
// simulator or the benches.
func TestTheProductNeverImportsTheTooling(t *testing.T) {
	pkgs := packages(t)
	require.Greater(t, len(pkgs), 20)
	var product, devkit int
	for _, p := range pkgs {
		if tooling(p.ImportPath) {
			devkit++
			continue
		}
		product++
		for _, d := range p.Deps {
			require.False(t, tooling(d), "%s imports %s: the product must not depend on the tooling", p.ImportPath, d)
		}
	}
	require.Positive(t, devkit, "the tooling is under shared/devkit")
	require.Positive(t, product)
}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)|<img[^>]+src="([^"]+)"`)

// heading is an ATX heading (up to three spaces, one to six #s, a space or
// nothing), its text without a closing run of #s.
var heading = regexp.MustCompile(`^ {0,3}#{1,6}(?:\s+(.*?))?(?:\s+#+)?\s*$`)

// Markup GitHub drops from a heading's anchor: a link's target (its text
// stays), and, outside code spans, an HTML tag and the underscores that
// open or close emphasis (snake_case keeps its own).
var (
	headingLink  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	htmlTag      = regexp.MustCompile(`<[^>]+>`)
	emphasisMark = regexp.MustCompile(`(^|\W)_+|_+(\W|$)`)
)

// anchors are the fragments GitHub gives a Markdown file's headings (and
// its explicit <a id>s), as github-slugger makes them: the heading's text
// in lower case, without punctuation, spaces as hyphens, one already
// given numbered (-1, -2…).
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	occurrences := map[string]int{}
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		if t := strings.TrimSpace(line); fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) {
			fence = t[:3]
			continue
		} else if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		for _, m := range explicitAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		parts := strings.Split(headingLink.ReplaceAllString(m[1], "$1"), "`")
		for i := 0; i < len(parts); i += 2 { // outside code spans
			parts[i] = emphasisMark.ReplaceAllString(htmlTag.ReplaceAllString(parts[i], ""), "$1$2")
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.Join(parts, "")) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		slug, base := b.String(), b.String()
		for out[slug] {
			occurrences[base]++
			slug = fmt.Sprintf("%s-%d", base, occurrences[base])
		}
		out[slug] = true
	}
	return out
}

// TestAnchorsAreGitHubs checks anchors on headings whose anchors GitHub is
// known to make.
func TestAnchorsAreGitHubs(t *testing.T) {
	text := strings.Join([]string{
		"# Operations",
		"### `<queue>-dlq-not-empty`: messages were set aside",
		"## A [linked](x.md) heading ##",
		"  ## _Emphasis_ and snake_case",
		"## A <b>bold</b> word",
		"## Foo", "## Foo-1", "## Foo",
		"#tag is not a heading",
		"```", "# not a heading", `<a id="fenced">`, "```",
		"~~~", "## nor this", "~~~",
		`Text <a id="explicit"></a>`,
	}, "\n")
	want := []string{"operations", "queue-dlq-not-empty-messages-were-set-aside", "a-linked-heading",
		"emphasis-and-snake_case", "a-bold-word", "foo", "foo-1", "foo-2", "explicit"}
	got := anchors(text)
	require.ElementsMatch(t, want, slices.Collect(maps.Keys(got)))
}

var explicitAnchor = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)

// Every relative link of the README and the docs resolves to a file of the
// repository, and one to a heading (file.md#heading, or #heading) to a
// heading of that file.
func TestEveryRelativeLinkOfTheDocsResolves(t *testing.T) {
	dir := root(t)
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md")
	cmd.Dir = dir
	out, err := cmd.Output()
	require.NoError(t, err, "git ls-files")
	files := strings.Fields(string(out))
	require.Contains(t, files, "README.md")
	links, headings := 0, 0
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(dir, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		require.NoError(t, err)
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := m[1] + m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, fragment, _ := strings.Cut(target, "#")
			path := filepath.Join(dir, filepath.Dir(f), target)
			if target == "" {
				path = filepath.Join(dir, f)
			}
			_, err := os.Stat(path)
			require.NoError(t, err, "%s links to %s, which does not exist", f, m[0])
			links++
			if fragment == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			to, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, anchors(string(to))[fragment], "%s links to %s: %s has no heading with that anchor", f, m[0], path)
			headings++
		}
	}
	require.Greater(t, links, 10, "the docs link to the code and to each other")
	require.Greater(t, headings, 10, "and to each other's headings")
}

// The README stays short: depth goes to docs/.
func TestTheReadmeIsShort(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root(t), "README.md"))
	require.NoError(t, err)
	require.Less(t, strings.Count(string(text), "\n"), 400)
}
