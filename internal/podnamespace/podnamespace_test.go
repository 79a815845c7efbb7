package podnamespace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultIsThePods(t *testing.T) {
	dir := t.TempDir()
	inCluster := filepath.Join(dir, "namespace")
	require.NoError(t, os.WriteFile(inCluster, []byte("ops\n"), 0o600))
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))

	tests := []struct {
		name      string
		give      string
		path      string
		want      string
		wantError string
	}{
		{name: "given", give: "team", path: inCluster, want: "team"},
		{name: "in a cluster", path: inCluster, want: "ops"},
		{name: "outside a cluster", path: filepath.Join(dir, "missing"), wantError: "leader election needs the Leases' namespace, and the app runs outside a cluster (no pod namespace to default to): set --leader-election-namespace"},
		{name: "empty file", path: empty, wantError: "empty: set --leader-election-namespace"},
		{name: "unreadable", path: dir, wantError: "read the pod's namespace for leader election (or set --leader-election-namespace)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Default(tt.give, tt.path, "leader election", "leader-election-namespace")
			if tt.wantError != "" {
				require.ErrorContains(t, err, tt.wantError)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
