package fxstore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/selectors"
)

// A registry remembers the canonical form of each selector as written:
// asking again for a spec gives the key canonicalising gives, and for a bad
// selector the same error, each time.
func TestRegistryRemembersCanonicalSelectors(t *testing.T) {
	tests := []struct{ labels, fields string }{
		{labels: "b in (2), a==1", fields: "metadata.name==x"},
		{labels: "a=1,b=2"},
		{labels: "a in (1)", fields: "metadata.namespace!=y, metadata.name=x"},
		{labels: "a=("},
		{fields: "metadata.name"},
		{labels: "-bad-=1", fields: "metadata.name=\x01"},
	}
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	for _, tt := range tests {
		t.Run(tt.labels+" "+tt.fields, func(t *testing.T) {
			wantLabels, labelsErr := selectors.Label(tt.labels)
			wantFields, fieldsErr := selectors.Field(tt.fields)
			spec := fxstore.Spec{LabelSelector: tt.labels, FieldSelector: tt.fields}
			var keyErrs, forErrs []string
			for range 3 {
				key, err := fxstore.KeyFor[*corev1.ConfigMap](r, spec)
				_, forErr := fxstore.For[*corev1.ConfigMap](r, spec)
				if labelsErr == nil && fieldsErr == nil {
					require.NoError(t, err)
					require.NoError(t, forErr)
					assert.Equal(t, wantLabels, key.LabelSelector)
					assert.Equal(t, wantFields, key.FieldSelector)
					continue
				}
				require.Error(t, err)
				require.Error(t, forErr)
				for _, want := range []error{labelsErr, fieldsErr} {
					if want != nil {
						assert.ErrorContains(t, err, want.Error())
					}
				}
				keyErrs, forErrs = append(keyErrs, err.Error()), append(forErrs, forErr.Error())
			}
			for i := range keyErrs {
				assert.Equal(t, keyErrs[0], keyErrs[i])
				assert.Equal(t, forErrs[0], forErrs[i])
			}
		})
	}
}

// The cluster of a registry is part of each of its keys, and of their
// names: one spec in two clusters is two stores.
func TestClusterIsPartOfTheKey(t *testing.T) {
	own := fxstore.NewRegistry(clientgoscheme.Scheme)
	east := fxstore.NewRegistry(clientgoscheme.Scheme, fxstore.WithCluster("east"))
	spec := fxstore.Spec{Namespace: "web"}

	ownKey, err := fxstore.KeyFor[*corev1.ConfigMap](own, spec)
	require.NoError(t, err)
	eastKey, err := fxstore.KeyFor[*corev1.ConfigMap](east, spec)
	require.NoError(t, err)

	assert.Empty(t, ownKey.Cluster)
	assert.Equal(t, "east", eastKey.Cluster)
	assert.NotEqual(t, ownKey, eastKey)
	assert.Equal(t, `ConfigMap/v1 (namespace "web")`, ownKey.String())
	assert.Equal(t, `ConfigMap/v1 (cluster "east", namespace "web")`, eastKey.String())
}
