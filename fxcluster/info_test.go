package fxcluster_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
)

var nop = fxcluster.Func(func(context.Context, fxcluster.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })

func toNothing(context.Context, client.Object) []reconcile.Request { return nil }

func newFleet(t *testing.T, opts fxcluster.Options) (*fxcluster.Fleet, *k8sruntime.Scheme) {
	t.Helper()
	scheme, err := fxstore.NewScheme()
	require.NoError(t, err)
	return fxcluster.NewFleet(scheme, nil, opts), scheme
}

// A controller's Info says what it reads and writes in every member, and
// what it watches in the app's own cluster; the fleet lists its
// controllers.
func TestControllerInfo(t *testing.T) {
	f, scheme := newFleet(t, fxcluster.Options{})
	own, err := fxstore.For[*corev1.ConfigMap](fxstore.NewRegistry(scheme), fxstore.Spec{LabelSelector: "source=true"})
	require.NoError(t, err)
	copies, err := fxcluster.For[*corev1.ConfigMap](f, fxstore.Spec{LabelSelector: "copy=true"})
	require.NoError(t, err)
	secrets, err := fxcluster.For[*corev1.Secret](f, fxstore.Spec{Namespace: "team"})
	require.NoError(t, err)
	c, err := fxcluster.NewController("copier", copies, nop,
		fxcluster.Watches(secrets, toNothing),
		fxcluster.WatchesOwnCluster(own, toNothing),
		fxcluster.Writes(corev1.Resource("configmaps"), "update", "create", "update"),
		fxcluster.Writes(corev1.Resource("namespaces"), "create"))
	require.NoError(t, err)

	assert.Equal(t, fxcluster.ControllerInfo{
		Name:       "copier",
		Primary:    copies.Key(),
		Secondary:  []fxstore.Key{secrets.Key()},
		OwnCluster: []fxstore.Key{own.Key()},
		Writes: []fxcontroller.Write{
			{Resource: corev1.Resource("configmaps"), Verbs: []string{"create", "update"}},
			{Resource: corev1.Resource("namespaces"), Verbs: []string{"create"}},
		},
		NeedsLeader: true,
	}, c.Info())
	assert.Equal(t, "*", c.Info().Primary.Cluster, "a store in every member is keyed in cluster \"*\"")
	assert.Equal(t, []*fxcluster.Controller{c}, f.Controllers())
}

// Writes that cannot be granted fail NewController, naming the fix.
func TestWritesErrors(t *testing.T) {
	tests := []struct {
		name string
		give fxcluster.ControllerOption
		want []string
	}{
		{name: "no resource, no verbs", give: fxcluster.Writes(schema.GroupResource{}), want: []string{"resource is empty", "no verbs"}},
		{name: "verbs in one string", give: fxcluster.Writes(corev1.Resource("configmaps"), "update,patch"), want: []string{`invalid verb "update,patch"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := newFleet(t, fxcluster.Options{})
			copies, err := fxcluster.For[*corev1.ConfigMap](f, fxstore.Spec{})
			require.NoError(t, err)
			_, err = fxcluster.NewController("copier", copies, nop, tt.give)
			require.Error(t, err)
			for _, want := range tt.want {
				assert.ErrorContains(t, err, want)
			}
			assert.Empty(t, f.Controllers())
		})
	}
}
