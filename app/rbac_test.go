package app_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
)

// rbacObject names an object the rbac command prints.
type rbacObject struct{ Kind, Namespace, Name string }

func rbacObjects(t *testing.T, out string) (objs []rbacObject, docs []string) {
	t.Helper()
	docs = strings.Split(out, "---\n")
	for _, doc := range docs {
		var o struct {
			Kind     string
			Metadata struct{ Namespace, Name string }
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o))
		objs = append(objs, rbacObject{o.Kind, o.Metadata.Namespace, o.Metadata.Name})
	}
	return objs, docs
}

// What the rbac command prints depends on the flags the app runs with.
func TestRBACFollowsTheFlags(t *testing.T) {
	app := []rbacObject{{"ClusterRole", "", "demo"}, {"ClusterRoleBinding", "", "demo"}}
	metrics := []rbacObject{{"ClusterRole", "", "demo-metrics-auth"}, {"ClusterRoleBinding", "", "demo-metrics-auth"}, {"ClusterRole", "", "demo-metrics-reader"}}
	tests := []struct {
		name string
		give []string
		want []rbacObject
	}{
		{name: "defaults: no metrics", want: app},
		{name: "secure metrics", give: []string{"--metrics-bind-address", ":8443"}, want: slices.Concat(app, metrics)},
		{name: "plain metrics", give: []string{"--metrics-bind-address", ":8080", "--metrics-secure=false"}, want: app},
		{name: "a lease in the pod's namespace", give: []string{"--leader-elect"},
			want: slices.Concat(app, []rbacObject{{"Role", "ops", "demo"}, {"RoleBinding", "ops", "demo"}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := execute(t, []fx.Option{deploys}, append([]string{"rbac", "--service-account", "ops/demo"}, tt.give...)...)
			require.NoError(t, err)
			got, _ := rbacObjects(t, out)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Secure metrics need, as kubebuilder's scaffold grants them, the app to
// review tokens and access, and scrapers to get /metrics.
func TestRBACForSecureMetrics(t *testing.T) {
	out, err := execute(t, []fx.Option{deploys}, "rbac", "--service-account", "ops/demo", "--metrics-bind-address", ":8443")
	require.NoError(t, err)
	_, docs := rbacObjects(t, out)
	require.Len(t, docs, 5, out)

	var auth, reader rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[2]), &auth))
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[3]), &binding))
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[4]), &reader))
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}, auth.Rules)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "demo-metrics-auth"}, binding.RoleRef)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "ops", Name: "demo"}}, binding.Subjects)
	assert.Equal(t, "demo-metrics-reader", reader.Name)
	assert.Equal(t, []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, reader.Rules)
}

// shardedWidgets is a module with a sharded controller of Secrets.
var shardedWidgets = fx.Module("sharded", fxcontroller.Provide(func(s *fxshard.Shards) (*fxcontroller.Controller, error) {
	secrets, err := fxshard.For[*corev1.Secret](s, fxstore.Spec{Namespace: "team"}, fxstore.ShardByUID)
	if err != nil {
		return nil, err
	}
	return fxcontroller.New("sharded", secrets, reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}))
}))

// A sharded app reads its sharded stores' resources and needs its group's
// Leases: where --shard-namespace says, by default the pod's.
func TestRBACForShards(t *testing.T) {
	out, err := execute(t, []fx.Option{shardedWidgets}, "rbac", "--service-account", "ops/demo", "--shard-namespace", "ops")
	require.NoError(t, err)
	objs, docs := rbacObjects(t, out)
	assert.Equal(t, []rbacObject{{"ClusterRole", "", "demo"}, {"ClusterRoleBinding", "", "demo"}, {"Role", "ops", "demo"}, {"RoleBinding", "ops", "demo"}, {"Role", "team", "demo"}, {"RoleBinding", "team", "demo"}}, objs)
	var leases, secrets rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[2]), &leases))
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[4]), &secrets))
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "delete", "get", "list", "update", "watch"}}}, leases.Rules)
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}}, secrets.Rules,
		"the sharded store's reads, which the registry does not hold before a bucket is acquired")

	// Without --shard-namespace, the Leases are in the pod's namespace: the
	// service account's.
	defaulted, err := execute(t, []fx.Option{shardedWidgets}, "rbac", "--service-account", "ops/demo")
	require.NoError(t, err)
	assert.Equal(t, out, defaulted)
}

// An app whose fleet shares its members out needs its group's Leases in
// the namespace the fleet's options name, whoever set them: a module
// here, not --shard-clusters.
func TestRBACForAFleetSharedOutByAModule(t *testing.T) {
	share := fx.Supply(fxcluster.Options{Share: &fxshard.Config{Name: "demo-clusters", Namespace: "fleet", Buckets: 4}})
	out, err := execute(t, []fx.Option{share}, "rbac", "--service-account", "ops/demo")
	require.NoError(t, err)
	objs, docs := rbacObjects(t, out)
	require.Contains(t, objs, rbacObject{"Role", "fleet", "demo"})
	var leases rbacv1.Role
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[slices.Index(objs, rbacObject{"Role", "fleet", "demo"})]), &leases))
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create", "delete", "get", "list", "update", "watch"}}}, leases.Rules)
}

// A controller that waits for its kind keeps its rules in rbac, and the
// app may watch the CRDs that tell it when the kind is served.
func TestRBACOfAControllerThatWaitsForItsKind(t *testing.T) {
	widgets := schema.GroupVersionKind{Group: "webhooks.example.fxkube.io", Version: "v1", Kind: "Widget"}
	modules := []fx.Option{fxcontroller.Provide(func(reg *fxstore.Registry) (*fxcontroller.Controller, error) {
		s, err := fxstore.For[*unstructured.Unstructured](reg, fxstore.Spec{Kind: widgets})
		if err != nil {
			return nil, err
		}
		return fxcontroller.New("widgets", s, nop, fxcontroller.WhenServed())
	})}
	out, err := execute(t, modules, "rbac", "--crds", "../test/webhooks/config/crd/webhooks.example.fxkube.io_widgets.yaml")
	require.NoError(t, err, out)
	objs, docs := rbacObjects(t, out)
	require.Equal(t, rbacObject{"ClusterRole", "", "demo"}, objs[0], out)
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.Unmarshal([]byte(docs[0]), &role))
	assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{"webhooks.example.fxkube.io"}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch"}})
	assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}})

	described, err := execute(t, modules, "describe")
	require.NoError(t, err, described)
	assert.Contains(t, described, "waits for its kinds to be served (fxcontroller.WhenServed)")
	assert.Contains(t, described, "consumers: fxcontroller.WhenServed")
}
