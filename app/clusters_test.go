package app_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

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
		"\nMember clusters: none engaged (describe --cluster checks those --cluster-kubeconfig names)\n")

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

// rbac prints what the app needs in its own cluster, then, under a
// comment, what it needs in each member: the reads of the member stores
// and the fleet controller's writes, bound to the member's identity.
func TestRBACForMemberClusters(t *testing.T) {
	out, err := execute(t, []fx.Option{fleet.Module}, "rbac", "--service-account", "ops/demo", "--member-service-account", "fleet/agent")
	require.NoError(t, err)
	objs, docs := rbacObjects(t, out)
	assert.Equal(t, []rbacObject{
		{"ClusterRole", "", "demo"}, {"ClusterRoleBinding", "", "demo"},
		{"ClusterRole", "", "demo-member"}, {"ClusterRoleBinding", "", "demo-member"},
	}, objs)
	assert.True(t, strings.HasPrefix(docs[2], "# For each member cluster, not the app's own: what demo needs there,\n"), docs[2])
	assert.Contains(t, docs[2], "# Apply it in every member: demo rbac --only members | kubectl --context <member> apply -f -\n")

	var own, member rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &own))
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[2]), &member))
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[3]), &binding))
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
	}, own.Rules, "the sources, read in the app's own cluster")
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "delete", "get", "list", "update", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}},
	}, member.Rules)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "demo-member"}, binding.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "fleet", Name: "agent"}}, binding.Subjects)

	tests := []struct {
		name    string
		give    []string
		want    []rbacObject
		wantErr string
	}{
		{name: "own only", give: []string{"--only", "own"}, want: []rbacObject{{"ClusterRole", "", "demo"}, {"ClusterRoleBinding", "", "demo"}}},
		{name: "members only", give: []string{"--only", "members"}, want: []rbacObject{{"ClusterRole", "", "demo-member"}, {"ClusterRoleBinding", "", "demo-member"}}},
		{name: "unknown set", give: []string{"--only", "everything"}, wantErr: `--only "everything": want own or members`},
		{name: "bad member account", give: []string{"--member-service-account", "agent"}, wantErr: `--member-service-account "agent": want namespace/name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, []fx.Option{fleet.Module}, append([]string{"rbac", "--service-account", "ops/demo"}, tt.give...)...)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			got, _ := rbacObjects(t, out)
			assert.Equal(t, tt.want, got)
		})
	}

	// An app that asks nothing of members prints no member set.
	out, err = execute(t, []fx.Option{deploys}, "rbac")
	require.NoError(t, err)
	assert.NotContains(t, out, "member")
	_, err = execute(t, []fx.Option{deploys}, "rbac", "--only", "members")
	require.ErrorContains(t, err, "the app asks nothing of member clusters")
}
