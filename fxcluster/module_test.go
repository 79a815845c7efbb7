package fxcluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxstore"
)

// The lifecycle runs the fleet and its controllers only when the fleet
// has providers: without one no member can join.
func TestRunnablesNeedProviders(t *testing.T) {
	scheme, err := fxstore.NewScheme()
	require.NoError(t, err)
	idle := ProviderFunc(func(ctx context.Context, _ Aware) error { <-ctx.Done(); return nil })
	tests := []struct {
		name      string
		providers []Provider
		want      int
	}{
		{name: "no providers", want: 0},
		{name: "a provider", providers: []Provider{idle}, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFleet(scheme, nil, Options{Providers: tt.providers})
			copies, err := For[*corev1.ConfigMap](f, fxstore.Spec{})
			require.NoError(t, err)
			c, err := NewController("copier", copies, Func(func(context.Context, Request) (reconcile.Result, error) { return reconcile.Result{}, nil }))
			require.NoError(t, err)
			got := runnables(runnablesParams{Fleet: f, Controllers: []*Controller{c}}).Runnables
			assert.Len(t, got, tt.want)
			if tt.want > 0 {
				assert.Equal(t, []manager.Runnable{f, elected{f}, c}, got)
			}
			assert.Equal(t, tt.want > 0, readiness(f) != nil, "a /readyz check list")
		})
	}
}
