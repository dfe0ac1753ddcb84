// Package images_test checks the container images' build contexts: every
// source file the image's `go build` reads must survive its
// Dockerfile.dockerignore, or the image fails to build with a missing
// package (no Docker engine runs in CI, so nothing else would notice).
package images_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// rule is one line of a .dockerignore: a pattern, negated with "!".
type rule struct {
	re     *regexp.Regexp
	negate bool
}

// compile turns a .dockerignore pattern into a regexp over slash paths
// relative to the context ("**" any number of directories, "*" and "?"
// within one path element), as Docker's documentation describes them.
func compile(pattern string) *regexp.Regexp {
	p := strings.Trim(filepath.ToSlash(filepath.Clean(pattern)), "/")
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		case p[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

func readRules(t *testing.T, path string) []rule {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []rule
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		neg := strings.HasPrefix(l, "!")
		rules = append(rules, rule{compile(strings.TrimPrefix(l, "!")), neg})
	}
	return rules
}

// kept reports whether path (relative, slash-separated) is in the build
// context: the last rule matching the path or one of its parent
// directories decides.
func kept(rules []rule, path string) bool {
	keep := true
	for _, r := range rules {
		for p := path; p != "."; p = filepath.ToSlash(filepath.Dir(p)) {
			if r.re.MatchString(p) {
				keep = r.negate
				break
			}
		}
	}
	return keep
}

// TestDockerignoreKeepsTheBuild: for each image, every Go and embedded file
// of this module that its `go build ./cmd/<name>` compiles is in the context.
func TestDockerignoreKeepsTheBuild(t *testing.T) {
	build := regexp.MustCompile(`go build[^\n]*?(?:\\\n[^\n]*?)*(\./cmd/[a-z0-9-]+)`)
	dirs, err := filepath.Glob("*/Dockerfile")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no images/*/Dockerfile found (%v)", err)
	}
	for _, df := range dirs {
		image := filepath.Dir(df)
		t.Run(image, func(t *testing.T) {
			data, err := os.ReadFile(df)
			if err != nil {
				t.Fatal(err)
			}
			m := build.FindAllStringSubmatch(string(data), -1)
			if len(m) == 0 {
				t.Fatalf("%s: no `go build ./cmd/...` found", df)
			}
			rules := readRules(t, df+".dockerignore")
			for _, cmdPkg := range m {
				out, err := exec.Command("go", "list", "-deps", "-f",
					`{{if .Module}}{{if eq .Module.Path "github.com/vgpushare/vshare"}}{{.Dir}}|{{join .GoFiles " "}} {{join .CgoFiles " "}} {{join .CFiles " "}} {{join .HFiles " "}} {{join .EmbedFiles " "}}{{end}}{{end}}`,
					"../"+strings.TrimPrefix(cmdPkg[1], "./")).Output()
				if err != nil {
					t.Fatalf("go list %s: %v", cmdPkg[1], err)
				}
				root, _ := filepath.Abs("..")
				files := 0
				for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					dir, names, ok := strings.Cut(line, "|")
					if !ok {
						continue
					}
					rel, _ := filepath.Rel(root, dir)
					for _, n := range strings.Fields(names) {
						p := filepath.ToSlash(filepath.Join(rel, n))
						files++
						if !kept(rules, p) {
							t.Errorf("%s.dockerignore leaves out %s, which go build %s compiles", df, p, cmdPkg[1])
						}
					}
				}
				if files == 0 {
					t.Errorf("go list %s: no files of this module", cmdPkg[1])
				}
				for _, must := range []string{"go.mod", "go.sum"} {
					if !kept(rules, must) {
						t.Errorf("%s.dockerignore leaves out %s", df, must)
					}
				}
			}
		})
	}
}
