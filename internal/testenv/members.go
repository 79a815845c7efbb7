package testenv

import (
	"errors"
	"sync"
	"testing"

	"github.com/fxkube/fxkube/internal/controlplane"
)

// Members starts n control planes of their own, at once, besides the one
// of TestMain, for a test of many clusters, and stops them when the test
// ends. Each takes about 0.5 GiB: three or four in a test are plenty.
func Members(tb testing.TB, n int) []*controlplane.Running {
	tb.Helper()
	dir, err := controlplane.AssetsDir()
	if err != nil {
		tb.Fatal(err)
	}
	members := make([]*controlplane.Running, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() { members[i], errs[i] = controlplane.Start(dir) })
	}
	wg.Wait()
	tb.Cleanup(func() {
		for _, cp := range members {
			if cp == nil {
				continue
			}
			if err := cp.Stop(); err != nil {
				tb.Errorf("stop a member control plane: %v", err)
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("start member control planes: %v", err)
	}
	return members
}
