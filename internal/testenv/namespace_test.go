package testenv

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestNamespace(t *testing.T) {
	kube, err := kubernetes.NewForConfig(Config(t))
	require.NoError(t, err)
	tests := []struct {
		name         string
		give         []NamespaceOption
		wantDeleting bool // once the test has ended
	}{
		{name: "kept"},
		{name: "deleted at end", give: []NamespaceOption{DeleteAtEnd}, wantDeleting: true},
	}
	for _, tt := range tests {
		var name string
		t.Run(tt.name, func(t *testing.T) {
			name = Namespace(t, kube, "testenv", tt.give...)
			assert.True(t, strings.HasPrefix(name, "testenv-"), name)
			assert.Greater(t, len(name), len("testenv-"), "a suffix is generated")
			ns, err := kube.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Nil(t, ns.DeletionTimestamp)
		})
		ns, err := kube.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err, "no namespace controller runs, so a deleted namespace stays, terminating")
		assert.Equal(t, tt.wantDeleting, ns.DeletionTimestamp != nil, "deleting")
	}
	assert.NotEqual(t, Namespace(t, kube, "testenv"), Namespace(t, kube, "testenv"), "each call creates a namespace")
}
