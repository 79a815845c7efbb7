package app_test

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	production = "github.com/fxkube/fxkube/cmd/app"
	// clientGoTesting is client-go's fake-client machinery. client-go's
	// gentype, which every typed client (and so controller-runtime) imports,
	// imports it from a file of fakes; the linker drops all of it from a
	// binary that uses no fake (kubernetes/kubernetes#137782).
	clientGoTesting = "k8s.io/client-go/testing"
	gentype         = "k8s.io/client-go/gentype"
)

// The production binary links no test code: without -tags local, cmd/app
// imports no envtest, nothing but gentype imports client-go's testing
// package, and the linked binary holds no code of either.
func TestProductionBinaryLinksNoTestCode(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps",
		"-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", production).Output()
	require.NoError(t, err, "go list: %s", stderr(err))
	testCode := func(pkg string) bool {
		return pkg == "testing" || strings.HasPrefix(pkg, "testing/") ||
			strings.Contains(pkg, "envtest") ||
			strings.HasPrefix(pkg, "sigs.k8s.io/controller-runtime/pkg/internal/testing") ||
			pkg == "github.com/fxkube/fxkube/internal/controlplane" ||
			pkg == "github.com/fxkube/fxkube/internal/testenv"
	}
	var linked, importers []string
	for line := range strings.Lines(string(out)) {
		pkg, imports, _ := strings.Cut(strings.TrimSpace(line), " ")
		if testCode(pkg) {
			linked = append(linked, pkg)
		}
		for _, imp := range strings.Fields(imports) {
			if imp == clientGoTesting {
				importers = append(importers, pkg)
			}
		}
	}
	assert.Empty(t, linked, "test packages among the production binary's dependencies")
	for _, pkg := range importers {
		assert.Equal(t, gentype, pkg, "%s imports %s", pkg, clientGoTesting)
	}

	bin := filepath.Join(t.TempDir(), "fxkube")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, production)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	symbols, err := exec.CommandContext(t.Context(), "go", "tool", "nm", bin).Output()
	require.NoError(t, err, "go tool nm: %s", stderr(err))
	require.Contains(t, string(symbols), " k8s.io/client-go/rest.", "nm names symbols by package")
	var testSymbols []string
	for line := range strings.Lines(string(symbols)) {
		if strings.Contains(line, clientGoTesting+".") || strings.Contains(line, "/envtest.") {
			testSymbols = append(testSymbols, strings.TrimSpace(line))
		}
	}
	assert.Empty(t, testSymbols[:min(len(testSymbols), 10)], "test code linked into the production binary (%d symbols)", len(testSymbols))
}

// stderr returns what a command that failed with err wrote to its stderr.
func stderr(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}
