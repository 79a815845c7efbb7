package testenv

import (
	"net"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fxkube/fxkube/internal/controlplane"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(WithControlPlane(m))
}

func TestConfig(t *testing.T) {
	cfg := Config(t)
	host, _, err := net.SplitHostPort(hostPort(t, cfg.Host))
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host, "the API server must listen on loopback only")

	cfg.Host = "https://example.invalid"
	assert.NotEqual(t, cfg.Host, Config(t).Host, "Config must return a copy")
}

func TestKubeconfigPath(t *testing.T) {
	cfg, err := clientcmd.BuildConfigFromFlags("", KubeconfigPath(t))
	require.NoError(t, err)
	assert.Equal(t, hostPort(t, Config(t).Host), hostPort(t, cfg.Host))

	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	v, err := dc.ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, controlplane.KubernetesVersion, v.GitVersion)
}

func TestKubectlPath(t *testing.T) {
	dir, err := controlplane.AssetsDir()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, controlplane.Kubectl), KubectlPath(t))
}

func hostPort(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	require.Equal(t, "https", u.Scheme)
	return u.Host
}

func TestUser(t *testing.T) {
	tests := []struct {
		desc      string
		giveGroup []string
		wantErr   bool
	}{
		{desc: "no RBAC rules", wantErr: true},
		{desc: "system:masters", giveGroup: []string{"system:masters"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			cs, err := kubernetes.NewForConfig(User(t, "alice", tt.giveGroup...))
			require.NoError(t, err)
			_, err = cs.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
			if tt.wantErr {
				require.True(t, apierrors.IsForbidden(err), "want forbidden, got %v", err)
				assert.Contains(t, err.Error(), `User "alice" cannot list resource "configmaps"`)
				return
			}
			require.NoError(t, err)
		})
	}
}
