// Package test holds fxkube's integration tests. They run against a real
// kube-apiserver and etcd (see internal/testenv); `make test` builds those
// first.
package test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fxkube/fxkube/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testenv.WithControlPlane(m))
}
