package test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fxkube/fxkube/internal/testenv"
)

// kubectl runs the control plane's kubectl against the test control plane,
// as a user would.
type kubectl struct {
	t     *testing.T
	cache string
}

func newKubectl(t *testing.T) kubectl {
	return kubectl{t: t, cache: t.TempDir()}
}

// try runs kubectl with args, and stdin if not empty, and returns its
// output.
func (k kubectl) try(stdin string, args ...string) (string, error) {
	return testenv.Kubectl(k.t, k.cache, stdin, args...)
}

// run runs kubectl and fails the test if it fails.
func (k kubectl) run(stdin string, args ...string) string {
	k.t.Helper()
	out, err := k.try(stdin, args...)
	require.NoError(k.t, err)
	return out
}

// apply applies manifests, and deletes what they describe when the test
// ends: cluster-scoped objects, such as RBAC, outlive the test's namespaces.
func (k kubectl) apply(manifests string) {
	k.t.Helper()
	k.run(manifests, "apply", "-f", "-")
	k.t.Cleanup(func() { k.run(manifests, "delete", "-f", "-") })
}

// eventually waits until kubectl args prints want.
func (k kubectl) eventually(want string, args ...string) {
	k.t.Helper()
	var got string
	var err error
	ok := assert.Eventually(k.t, func() bool {
		got, err = k.try("", args...)
		return err == nil && got == want
	}, 30*time.Second, 100*time.Millisecond)
	if !ok {
		k.t.Fatalf("kubectl %s: got %q (error %v), want %q", strings.Join(args, " "), got, err, want)
	}
}
