package fxstore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/fxstore"
)

func TestCanonicalLabelSelector(t *testing.T) {
	tests := []struct {
		give    string
		want    string
		wantErr string
	}{
		{give: "", want: ""},
		{give: "a=1,b=2", want: "a=1,b=2"},
		{give: " b=2, a=1", want: "a=1,b=2"},
		{give: "a==1", want: "a=1"},
		{give: "a=1,a=1", want: "a=1"},
		{give: "a in (1)", want: "a=1"},
		{give: "a notin (1)", want: "a!=1"},
		{give: "env in (prod, dev),tier", want: "env in (dev,prod),tier"},
		{give: "tier, env in (dev,prod)", want: "env in (dev,prod),tier"},
		{give: "!legacy,app=web", want: "!legacy,app=web"},
		{give: "app=web,!legacy", want: "!legacy,app=web"},
		{give: "x notin (b,a),y!=2", want: "x notin (a,b),y!=2"},
		{give: "a=(", wantErr: `invalid label selector "a=("`},
		{give: "-bad-=1", wantErr: "invalid label selector"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := fxstore.CanonicalLabelSelector(tt.give)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := fxstore.CanonicalLabelSelector(got)
			require.NoError(t, err)
			assert.Equal(t, got, again, "canonicalising twice changes nothing")
		})
	}
}

func TestCanonicalFieldSelector(t *testing.T) {
	tests := []struct {
		give    string
		want    string
		wantErr string
	}{
		{give: "", want: ""},
		{give: "metadata.name=x", want: "metadata.name=x"},
		{give: "status.phase!=Running, metadata.name==x", want: "metadata.name=x,status.phase!=Running"},
		{give: "metadata.name=x,metadata.name=x", want: "metadata.name=x"},
		{give: `metadata.name=a\,b`, want: `metadata.name=a\,b`},
		{give: "metadata.name", wantErr: `invalid field selector "metadata.name"`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := fxstore.CanonicalFieldSelector(tt.give)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := fxstore.CanonicalFieldSelector(got)
			require.NoError(t, err)
			assert.Equal(t, got, again)
		})
	}
}

func TestSelectorsRejectControlCharacters(t *testing.T) {
	_, err := fxstore.CanonicalLabelSelector("a=1,\x00b=2")
	require.ErrorContains(t, err, `control character '\x00' at byte 4`)
	_, err = fxstore.CanonicalFieldSelector("metadata.name=\x01")
	require.ErrorContains(t, err, "control character")
	got, err := fxstore.CanonicalLabelSelector("a=1,\tb=2\n")
	require.NoError(t, err)
	assert.Equal(t, "a=1,b=2", got)
}

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
			wantLabels, labelsErr := fxstore.CanonicalLabelSelector(tt.labels)
			wantFields, fieldsErr := fxstore.CanonicalFieldSelector(tt.fields)
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
