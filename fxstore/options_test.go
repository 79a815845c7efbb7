package fxstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
)

func byTier(cm *corev1.ConfigMap) []string { return []string{cm.Labels["tier"]} }

func ownerName(o client.Object) []string { return []string{o.GetName()} }

// Every option prints as the call that made it, as fx's options do.
func TestOptionsPrintTheirCall(t *testing.T) {
	tests := []struct {
		give fmt.Stringer
		want string
	}{
		{fxstore.WithIndex("app", byApp), `fxstore.WithIndex("app", fxstore_test.byApp)`},
		{fxstore.WithFieldIndex("spec.owner", ownerName), `fxstore.WithFieldIndex("spec.owner", fxstore_test.ownerName)`},
		{fxstore.WithConsumer("rollout"), `fxstore.WithConsumer("rollout")`},
		{fxstore.WithOwnInformer(), `fxstore.WithOwnInformer()`},
		{fxstore.WithoutSharing(), `fxstore.WithoutSharing()`},
		{fxstore.WithLogger(zap.NewNop().Named("stores")), `fxstore.WithLogger(logger "stores")`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.give.String())
	}
}

// An error about an option names it as the call that made it.
func TestOptionErrorsNameTheCall(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.WithIndex("app", byApp))
	require.NoError(t, err)
	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.WithIndex("app", byTier))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `fxstore.WithIndex("app", fxstore_test.byTier): index "app" is already defined with another function`)
	assert.Contains(t, err.Error(), `(fxstore.WithIndex("app", fxstore_test.byApp) defined it)`)

	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.WithIndex("", byApp))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `fxstore.WithIndex("", fxstore_test.byApp): index has no name`)
}
