// Package reliability tests fxkube under faults, bad input and load, on a real
// kube-apiserver and etcd of its own: its tests restart the API server and
// compact etcd, which would disturb the tests of any package sharing them.
// RELIABILITY.md, at the root of the repository, reports what they found.
package reliability

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fxkube/fxkube/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testenv.WithControlPlane(m))
}
