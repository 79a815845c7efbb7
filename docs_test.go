package fxkube_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/modules/checksum"
	"github.com/fxkube/fxkube/modules/mirror"
	"github.com/fxkube/fxkube/modules/rollout"
)

// readDoc returns the text of a Markdown file under docs/.
func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	require.NoError(t, err)
	return string(b)
}

// sections splits Markdown into its "## " sections, by heading.
func sections(doc string) map[string]string {
	out := map[string]string{}
	heading := ""
	for line := range strings.Lines(doc) {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			heading = strings.TrimSpace(h)
			continue
		}
		out[heading] += line
	}
	return out
}

// tableRows returns the cells of each row of the tables in md, trimmed,
// headers and rules left out.
func tableRows(md string) [][]string {
	var rows [][]string
	afterRow := false // the previous line is the last of rows, maybe a header
	for line := range strings.Lines(md) {
		parts := strings.Split(strings.TrimSpace(line), "|")
		if len(parts) < 3 || parts[0] != "" {
			afterRow = false
			continue
		}
		cells := parts[1:]
		if strings.TrimSpace(cells[len(cells)-1]) == "" {
			cells = cells[:len(cells)-1]
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if strings.HasPrefix(cells[0], "---") {
			if afterRow {
				rows = rows[:len(rows)-1]
			}
			afterRow = false
			continue
		}
		rows = append(rows, cells)
		afterRow = true
	}
	return rows
}

var flagName = regexp.MustCompile("`--([a-z0-9-]+)`")

// documentedFlags returns the flags named in the first column of md's
// tables.
func documentedFlags(md string) []string {
	var names []string
	for _, row := range tableRows(md) {
		for _, m := range flagName.FindAllStringSubmatch(row[0], -1) {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

func flagNames(fs *pflag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			names = append(names, f.Name)
		}
	})
	slices.Sort(names)
	return names
}

// docs/reference/flags.md lists exactly the flags the binary defines: those
// of every command under "## Every command", and each command's own under
// its name. The local command is in binaries built with -tags local only;
// without the tag its section is not checked.
func TestFlagsPageListsEveryFlag(t *testing.T) {
	page := sections(readDoc(t, "docs/reference/flags.md"))
	root := app.Command("fxkube")
	assert.Equal(t, flagNames(root.PersistentFlags()), documentedFlags(page["Every command"]), "## Every command")
	commands := map[string]*cobra.Command{}
	for _, cmd := range root.Commands() {
		if cmd.Name() == "help" || cmd.Name() == "completion" {
			continue
		}
		commands[cmd.Name()] = cmd
		assert.Equal(t, flagNames(cmd.LocalNonPersistentFlags()), documentedFlags(page[cmd.Name()]), "## %s", cmd.Name())
	}
	// Flags named anywhere on the page exist, so a renamed flag leaves no
	// stale mention.
	known := append(flagNames(root.PersistentFlags()), "help")
	for _, cmd := range commands {
		known = append(known, flagNames(cmd.LocalNonPersistentFlags())...)
	}
	if commands["local"] == nil {
		t.Log("not checking ## local: this binary has no local command (build with -tags local)")
		known = append(known, documentedFlags(page["local"])...)
	}
	for heading, text := range page {
		for _, m := range mentionedFlag.FindAllStringSubmatch(text, -1) {
			assert.True(t, slices.Contains(known, m[1]), "## %s mentions --%s, which no command defines", heading, m[1])
		}
	}
}

// mentionedFlag matches a flag in prose or code, not a pattern such as
// --zap-*.
var mentionedFlag = regexp.MustCompile("(?:^|[\\s`(])--([a-z][a-z0-9-]*[a-z0-9])(?:[=\\s`,.;:)]|$)")

// metric is a Prometheus series the code defines.
type metric struct {
	name   string
	labels []string
}

// definedMetrics returns the fxkube_* series defined with
// prometheus.NewDesc in the module's non-test Go files. It fails the test
// if a "fxkube_" string appears elsewhere in them, so a series made some
// other way cannot escape the page.
func definedMetrics(t *testing.T) map[string]metric {
	t.Helper()
	defined := map[string]metric{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || path == "test/controlplane"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		inDesc := map[*ast.BasicLit]bool{}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 3 {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "NewDesc" {
				return true
			}
			name, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				return true
			}
			m := metric{name: unquote(t, name.Value)}
			if labels, ok := call.Args[2].(*ast.CompositeLit); ok {
				for _, l := range labels.Elts {
					if lit, ok := l.(*ast.BasicLit); ok {
						m.labels = append(m.labels, unquote(t, lit.Value))
					}
				}
			}
			if strings.HasPrefix(m.name, "fxkube_") {
				inDesc[name] = true
				defined[m.name] = m
			}
			return true
		})
		ast.Inspect(file, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.HasPrefix(unquote(t, lit.Value), "fxkube_") && !inDesc[lit] {
				t.Errorf("%s: %s is not the name of a prometheus.NewDesc; make it one, so that docs/reference/metrics.md is checked", path, lit.Value)
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return defined
}

func unquote(t *testing.T, s string) string {
	u, err := strconv.Unquote(s)
	require.NoError(t, err)
	return u
}

var backticked = regexp.MustCompile("`([^`]+)`")

// docs/reference/metrics.md lists every fxkube_* series the code defines,
// with its labels, and a type that agrees with its name (counters end in
// _total), and no other.
func TestMetricsPageListsEverySeries(t *testing.T) {
	defined := definedMetrics(t)
	require.NotEmpty(t, defined)
	documented := map[string]bool{}
	for line := range strings.Lines(readDoc(t, "docs/reference/metrics.md")) {
		cells := strings.Split(line, "|")
		if len(cells) < 6 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`fxkube_") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		typ := strings.TrimSpace(cells[2])
		var labels []string
		for _, m := range backticked.FindAllStringSubmatch(cells[3], -1) {
			labels = append(labels, m[1])
		}
		documented[name] = true
		want, ok := defined[name]
		if !assert.True(t, ok, "metrics.md lists %s, which the code does not define", name) {
			continue
		}
		assert.Equal(t, want.labels, labels, "labels of %s", name)
		wantType := "gauge"
		if strings.HasSuffix(name, "_total") {
			wantType = "counter"
		}
		assert.Equal(t, wantType, typ, "type of %s", name)
	}
	for name := range defined {
		assert.True(t, documented[name], "metrics.md does not list %s", name)
	}
}

// fenced returns the text of the Markdown code blocks of language lang in
// md, in order.
func fenced(md, lang string) []string {
	var blocks []string
	var cur *strings.Builder
	for line := range strings.Lines(md) {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```"+lang:
			cur = &strings.Builder{}
		case cur != nil && trimmed == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return blocks
}

// exampleModules is the module list of cmd/app/main.go, which
// TestConceptsDrawsTheExampleApp draws.
const exampleModules = "rollout.Module, mirror.Module, checksum.Module"

// The Mermaid graph of docs/concepts.md is what `describe -o mermaid`
// prints for the example app today.
func TestConceptsDrawsTheExampleApp(t *testing.T) {
	main, err := os.ReadFile("cmd/app/main.go")
	require.NoError(t, err)
	require.Contains(t, string(main), `app.Main("fxkube", `+exampleModules+")",
		"cmd/app lists other modules: update exampleModules and the list below")
	root := app.Command("fxkube", rollout.Module, mirror.Module, checksum.Module)
	var out strings.Builder
	root.SetOut(&out)
	root.SetArgs([]string{"describe", "-o", "mermaid"})
	require.NoError(t, root.Execute())

	graphs := fenced(readDoc(t, "docs/concepts.md"), "mermaid")
	require.Len(t, graphs, 1)
	assert.Equal(t, out.String(), graphs[0],
		"docs/concepts.md's graph differs: paste in what `go run ./cmd/app describe -o mermaid` prints")
}

// Every ```go block of README.md and the Markdown files under docs/ is the text of a region of a Go
// file of this module, which `go test ./...` compiles (and, for tests and
// examples, runs). The region may be indented by whole tabs, as code in a
// function is; the block shows it dedented.
//
// Why quote rather than extract: the code lives where it is compiled,
// vetted, linted and run, with its imports and tests, as ordinary Go. A
// doc shows the part worth reading. No generator, no build tags, no copy
// of the imports in the docs; a change to the code fails this test until
// the doc is pasted again, and the message says which block.
func TestDocsGoBlocksAreCompiled(t *testing.T) {
	var sources []string
	var docs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "bin" || d.Name() == "testdata" || path == "test/controlplane"):
			return filepath.SkipDir // not this module's compiled code
		case strings.HasSuffix(path, ".go"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources = append(sources, "\n"+string(b))
		case strings.HasSuffix(path, ".md") && (strings.HasPrefix(path, "docs/") || path == "README.md"):
			docs = append(docs, path)
		}
		return nil
	})
	require.NoError(t, err)
	checked := 0
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		require.NoError(t, err)
		for i, block := range fenced(string(text), "go") {
			checked++
			assert.True(t, inSources(block, sources),
				"%s: go block %d is not a region of any Go file of the module; copy it from the code it shows:\n%s", doc, i+1, block)
		}
	}
	t.Logf("%d go blocks in %d Markdown files", checked, len(docs))
}

// inSources reports whether block, indented by 0 to 4 tabs, is a run of
// whole lines of one of sources (each starting with a newline).
func inSources(block string, sources []string) bool {
	for tabs := range 5 {
		var b strings.Builder
		b.WriteString("\n")
		for line := range strings.Lines(block) {
			if strings.TrimSpace(line) != "" {
				b.WriteString(strings.Repeat("\t", tabs))
			}
			b.WriteString(line)
		}
		for _, src := range sources {
			if strings.Contains(src, b.String()) {
				return true
			}
		}
	}
	return false
}
