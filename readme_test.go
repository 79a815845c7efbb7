package fxkube_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The README's first screen, its first 40 lines, says what fxkube is,
// how to install it, the two commands and where the docs are.
func TestREADMEFirstScreen(t *testing.T) {
	lines := strings.SplitAfter(readDoc(t, "README.md"), "\n")
	screen := strings.Join(lines[:min(40, len(lines))], "")
	tests := []struct {
		desc string
		want string
	}{
		{desc: "what fxkube is", want: "\nfxkube is a Go framework for running many small Kubernetes controllers"},
		{desc: "the install line", want: "\ngo get github.com/fxkube/fxkube@latest\n"},
		{desc: "the run command", want: "\nmake run "},
		{desc: "the test command", want: "\nmake test "},
		{desc: "where the docs are", want: "](docs/README.md)"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			require.Contains(t, screen, tt.want, "README.md's first 40 lines do not say %s", tt.desc)
		})
	}
}

// compatRow is a row of the README's compatibility table.
type compatRow struct {
	row     string   // the first cell
	gomod   string   // the go.mod that pins the versions
	modules []string // the modules of the row, all at one version; "go" is the go line
	want    string   // the Version cell, %s for the version
}

// The README's compatibility table states the versions go.mod and
// test/controlplane/go.mod pin, and where each is pinned. It has a row
// for each case below, and no other.
func TestREADMECompatibilityTable(t *testing.T) {
	table := map[string][]string{} // the README's rows, by first cell
	for _, row := range tableRows(sections(readDoc(t, "README.md"))["Compatibility"]) {
		require.Len(t, row, 3, "README.md's compatibility row %q: want Component, Version, Pinned in", row[0])
		table[row[0]] = row
	}
	tests := []compatRow{
		{row: "Go", gomod: "go.mod", modules: []string{"go"}, want: "%s or later"},
		{
			row:     "k8s.io/*",
			gomod:   "go.mod",
			modules: []string{"k8s.io/api", "k8s.io/apimachinery", "k8s.io/client-go", "k8s.io/apiextensions-apiserver", "k8s.io/component-base"},
			want:    "%s",
		},
		{row: "controller-runtime", gomod: "go.mod", modules: []string{"sigs.k8s.io/controller-runtime"}, want: "%s"},
		{row: "kube-apiserver, kubectl", gomod: "test/controlplane/go.mod", modules: []string{"k8s.io/kubernetes"}, want: "%s"},
		{row: "etcd", gomod: "test/controlplane/go.mod", modules: []string{"go.etcd.io/etcd/server/v3"}, want: "%s"},
	}
	for _, tt := range tests {
		t.Run(tt.row, func(t *testing.T) {
			row, ok := table[tt.row]
			require.True(t, ok, "README.md's compatibility table has no row %q", tt.row)
			pinned := goModVersions(t, tt.gomod)
			var names []string
			for _, m := range tt.modules {
				v, ok := pinned[m]
				require.True(t, ok, "%s pins no %s", tt.gomod, m)
				require.Equal(t, fmt.Sprintf(tt.want, v), row[1],
					"README.md's compatibility row %q says %s, but %s pins %s %s", tt.row, row[1], tt.gomod, m, v)
				names = append(names, "`"+m+"`")
			}
			require.Equal(t, strings.Join(names, ", ")+" in "+tt.gomod, row[2],
				"README.md's compatibility row %q: Pinned in", tt.row)
		})
	}
	for name := range table {
		require.True(t, slices.ContainsFunc(tests, func(tt compatRow) bool { return tt.row == name }),
			"README.md's compatibility row %q is not checked: add it to TestREADMECompatibilityTable", name)
	}
}

// goModVersions returns the versions the go.mod at path requires, by
// module path, and its go line's as "go". Replacements are not applied:
// the modules the README names are required, not replaced.
func goModVersions(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	require.NoError(t, err)
	versions := map[string]string{}
	block := "" // the directive of the ( block the line is in
	for line := range strings.Lines(string(b)) {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case block != "":
			if f[0] == ")" {
				block = ""
			} else if block == "require" && len(f) == 2 {
				versions[f[0]] = f[1]
			}
		case len(f) == 2 && f[1] == "(":
			block = f[0]
		case len(f) == 2 && f[0] == "go":
			versions["go"] = f[1]
		case len(f) == 3 && f[0] == "require":
			versions[f[1]] = f[2]
		}
	}
	require.NotEmpty(t, versions, "%s requires nothing", path)
	return versions
}
