package app_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
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
