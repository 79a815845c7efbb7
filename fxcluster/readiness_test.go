package fxcluster

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
)

// Each member has a readiness check of its own, which fails, naming its
// state and cause, while the member is not ready.
func TestReadinessPerCluster(t *testing.T) {
	scheme, err := fxstore.NewScheme()
	require.NoError(t, err)
	away := fxstoretest.NewSource(scheme)
	away.Fail(errors.New("connection refused"))
	f := runFleet(t, map[ClusterName]*fxstoretest.Source{"east": fxstoretest.NewSource(scheme), "away": away})
	checks := readiness(f)
	require.NotNil(t, checks)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := checks()
		if !assert.Len(c, got, 2) {
			return
		}
		assert.NoError(c, got["cluster-east"](nil))
		err := got["cluster-away"](nil)
		assert.ErrorContains(c, err, `cluster "away" failed since `)
		assert.ErrorContains(c, err, "connection refused")
	}, 30*time.Second, 10*time.Millisecond)

	assert.Nil(t, readiness(NewFleet(scheme, nil, Options{})), "a fleet without providers has no checks")
}
