package app_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/modules/fleet"
)

// describe connects to no cluster, so no member has joined: it shows what
// every member is asked, and the fleet controller's watch of the app's
// own cluster.
func TestDescribeShowsClusters(t *testing.T) {
	const (
		copies  = `ConfigMap/v1 (cluster "*", all namespaces, labels "fxkube.io/fleet-copy=true")`
		sources = `ConfigMap/v1 (all namespaces, labels "fxkube.io/fleet=true")`
	)
	out, err := execute(t, []fx.Option{fleet.Module}, "describe")
	require.NoError(t, err)
	assert.Contains(t, out, "1 store requests → 1 specs → 1 informers\n", "the members' stores are not the app's own")
	assert.Contains(t, out, "  "+sources+"\n    consumers: fleet.newController\n    controllers: fleet\n")
	assert.Contains(t, out, "In every member cluster:\n"+
		"  Stores:\n"+
		"    "+copies+"\n      consumers: fleet.newController\n      controllers: fleet\n"+
		"  Controllers:\n"+
		"    fleet\n      primary: "+copies+"\n"+
		"      watches in the app's own cluster: "+sources+"\n"+
		"      writes:  configmaps (create,delete,update)\n"+
		"      writes:  namespaces (create)\n"+
		"\nMember clusters: none engaged (describe connects to no cluster)\n")

	out, err = execute(t, []fx.Option{fleet.Module}, "describe", "-o", "json")
	require.NoError(t, err)
	var g app.Graph
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	require.NotNil(t, g.Clusters)
	assert.Equal(t, []app.ClusterController{{
		Name: "fleet", Primary: copies, OwnCluster: []string{sources},
		Writes: []string{"configmaps (create,delete,update)", "namespaces (create)"}, NeedsLeader: true,
	}}, g.Clusters.Controllers)
	require.Len(t, g.Clusters.Stores, 1)
	assert.Equal(t, app.Store{
		Key: copies, Version: "v1", Kind: "ConfigMap", LabelSelector: "fxkube.io/fleet-copy=true",
		Projection: "typed", Transform: "strip-managed-fields", Consumers: []string{"fleet.newController"}, Controllers: []string{"fleet"},
	}, g.Clusters.Stores[0])
	assert.Empty(t, g.Clusters.Members)

	// An app that asks nothing of members describes none.
	out, err = execute(t, []fx.Option{deploys}, "describe", "-o", "json")
	require.NoError(t, err)
	g = app.Graph{}
	require.NoError(t, json.Unmarshal([]byte(out), &g))
	assert.Nil(t, g.Clusters)
	out, err = execute(t, []fx.Option{deploys}, "describe")
	require.NoError(t, err)
	assert.NotContains(t, out, "member cluster")
}
