package docs_test

import (
	"bufio"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/vgpushare/vshare/"

// notDrawn are the package prefixes architecture.md's picture leaves out:
// the test harness, tools and test support.
var notDrawn = []string{
	"e2e", "bench", "hack", "docs", "cmd/tracesim",
	"backends/conformance", "backends/internal/testkit", "nodeagent/deviceplugin/fakekubelet",
}

// group is one left-hand side of the picture: a package, or with "/*" a
// package and everything under it.
type group string

func (g group) matches(pkg string) bool {
	if p, ok := strings.CutSuffix(string(g), "/*"); ok {
		return pkg == p || strings.HasPrefix(pkg, p+"/")
	}
	return pkg == string(g)
}

// specificity orders overlapping groups: an exact package beats a prefix,
// a longer prefix a shorter one.
func (g group) specificity() int {
	if strings.HasSuffix(string(g), "/*") {
		return 2 * len(g)
	}
	return 2*len(g) + 1
}

// pictureEdges reads the import picture of architecture.md.
func pictureEdges(t *testing.T) (groups []group, edges map[string]bool) {
	t.Helper()
	text := readDoc(t, "architecture.md")
	_, block, ok := strings.Cut(text, "<!-- imports: begin -->")
	block, _, ok2 := strings.Cut(block, "<!-- imports: end -->")
	if !ok || !ok2 {
		t.Fatal("architecture.md: no <!-- imports: begin --> ... <!-- imports: end --> block")
	}
	line := regexp.MustCompile(`^(\S+)\s+──►\s+(.+)$`)
	edges = map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(block))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "```") {
			continue
		}
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("architecture.md import picture: line %q is not `group ──► group, ...`", l)
		}
		groups = append(groups, group(m[1]))
		if m[2] == "(nothing of ours)" {
			continue
		}
		for _, to := range strings.Split(m[2], ",") {
			edges[m[1]+" ──► "+strings.TrimSpace(to)] = true
		}
	}
	return groups, edges
}

// TestArchitectureIsAStack: the picture lists groups from the top of the
// stack (commands) to the bottom (protocols and leaves), and every group
// imports only groups drawn below it, so no import runs back up.
func TestArchitectureIsAStack(t *testing.T) {
	groups, edges := pictureEdges(t)
	line := map[string]int{}
	for i, g := range groups {
		if _, dup := line[string(g)]; dup {
			t.Errorf("architecture.md import picture: group %s drawn twice", g)
		}
		line[string(g)] = i
	}
	for e := range edges {
		from, to, _ := strings.Cut(e, " ──► ")
		if to == "Volcano" {
			continue
		}
		i, ok := line[to]
		if !ok {
			t.Errorf("architecture.md import picture: %s imports %s, which has no line of its own", from, to)
			continue
		}
		if i <= line[from] {
			t.Errorf("architecture.md import picture: %s imports %s, drawn above it: an arrow up", from, to)
		}
	}
}

// groupOf names the most specific group holding pkg ("" if none).
func groupOf(groups []group, pkg string) string {
	best := group("")
	for _, g := range groups {
		if g.matches(pkg) && g.specificity() > best.specificity() {
			best = g
		}
	}
	return string(best)
}

func drawn(pkg string) bool {
	for _, p := range notDrawn {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return false
		}
	}
	return true
}

// TestArchitectureImports: the import picture in architecture.md is the
// one `go list` sees, edge for edge (non-test imports).
func TestArchitectureImports(t *testing.T) {
	groups, want := pictureEdges(t)
	out, err := exec.Command("go", "list", "-f", `{{if .GoFiles}}{{.ImportPath}} {{join .Imports " "}}{{end}}`, "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	got := map[string]string{} // edge -> an example package import
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue // only test files: nothing the product imports
		}
		pkg, ok := strings.CutPrefix(f[0], module)
		if !ok || !drawn(pkg) {
			continue
		}
		from := groupOf(groups, pkg)
		if from == "" {
			t.Errorf("package %s is in no group of architecture.md's import picture", pkg)
			continue
		}
		for _, imp := range f[1:] {
			var to string
			switch {
			case strings.HasPrefix(imp, "volcano.sh/volcano/"):
				to = "Volcano"
			case strings.HasPrefix(imp, module):
				dep := strings.TrimPrefix(imp, module)
				if to = groupOf(groups, dep); to == "" {
					t.Errorf("%s imports %s, which is in no group of the picture", pkg, dep)
					continue
				}
			default:
				continue
			}
			if to != from {
				got[from+" ──► "+to] = fmt.Sprintf("%s imports %s", pkg, imp)
			}
		}
	}
	var problems []string
	for e, why := range got {
		if !want[e] {
			problems = append(problems, fmt.Sprintf("not drawn: %s (%s)", e, why))
		}
	}
	for e := range want {
		if _, ok := got[e]; !ok {
			problems = append(problems, fmt.Sprintf("drawn but no package imports it: %s", e))
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Errorf("architecture.md import picture: %s", p)
	}
}
