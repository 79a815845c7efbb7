package controlplane

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersionsMatchBuild keeps the constants in step with the versions
// build.sh builds. It reads test/controlplane/go.mod with build.sh's own rule:
// the second field of the first line whose first field is the module path.
func TestVersionsMatchBuild(t *testing.T) {
	f, err := os.Open("../../test/controlplane/go.mod")
	require.NoError(t, err)
	defer f.Close()

	want := map[string]string{
		"k8s.io/kubernetes":         KubernetesVersion,
		"go.etcd.io/etcd/server/v3": EtcdVersion,
	}
	got := make(map[string]string)
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 2 {
			continue
		}
		if _, ok := want[fields[0]]; ok {
			if _, seen := got[fields[0]]; !seen {
				got[fields[0]] = fields[1]
			}
		}
	}
	require.NoError(t, s.Err())
	assert.Equal(t, want, got)
}

func TestDir(t *testing.T) {
	const leaf = "kubernetes-" + KubernetesVersion + "-etcd-" + EtcdVersion
	tests := []struct {
		desc string
		give map[string]string // environment
		want string
	}{
		{
			desc: "home",
			give: map[string]string{"HOME": "/home/u"},
			want: "/home/u/.cache/fxkube/controlplane/" + leaf,
		},
		{
			desc: "XDG_CACHE_HOME over HOME",
			give: map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg"},
			want: "/xdg/fxkube/controlplane/" + leaf,
		},
		{
			desc: "FXKUBE_CONTROLPLANE_CACHE over everything",
			give: map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg", "FXKUBE_CONTROLPLANE_CACHE": "/cp"},
			want: "/cp/" + leaf,
		},
		{
			desc: "empty counts as unset",
			give: map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "", "FXKUBE_CONTROLPLANE_CACHE": ""},
			want: "/home/u/.cache/fxkube/controlplane/" + leaf,
		},
		{
			desc: "trailing slash",
			give: map[string]string{"FXKUBE_CONTROLPLANE_CACHE": "/cp/"},
			want: "/cp/" + leaf,
		},
		{
			desc: "no HOME",
			give: map[string]string{"HOME": ""},
			want: "/.cache/fxkube/controlplane/" + leaf,
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			for _, k := range []string{"HOME", "XDG_CACHE_HOME", "FXKUBE_CONTROLPLANE_CACHE"} {
				t.Setenv(k, tt.give[k])
			}
			assert.Equal(t, tt.want, Dir())
		})
	}
}

func TestCheck(t *testing.T) {
	const exe, noexe = 0o755, 0o644
	tests := []struct {
		desc    string
		give    map[string]os.FileMode // files to create; os.ModeDir makes a directory
		wantErr string                 // the list of bad binaries; empty means no error
	}{
		{
			desc: "all present",
			give: map[string]os.FileMode{APIServer: exe, Etcd: exe, Kubectl: exe},
		},
		{
			desc:    "empty dir",
			wantErr: "kube-apiserver, etcd, kubectl",
		},
		{
			desc:    "one missing",
			give:    map[string]os.FileMode{APIServer: exe, Kubectl: exe},
			wantErr: "etcd",
		},
		{
			desc:    "not executable",
			give:    map[string]os.FileMode{APIServer: exe, Etcd: exe, Kubectl: noexe},
			wantErr: "kubectl",
		},
		{
			desc:    "directory",
			give:    map[string]os.FileMode{APIServer: os.ModeDir | exe, Etcd: exe, Kubectl: exe},
			wantErr: "kube-apiserver",
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			dir := t.TempDir()
			for name, mode := range tt.give {
				path := filepath.Join(dir, name)
				if mode.IsDir() {
					require.NoError(t, os.Mkdir(path, mode.Perm()))
				} else {
					require.NoError(t, os.WriteFile(path, nil, mode))
				}
			}
			err := Check(dir)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, "control plane binaries missing or not executable in "+
				dir+": "+tt.wantErr+"; run `make controlplane` to build them")
		})
	}
}

func TestAssetsDir(t *testing.T) {
	t.Run("KUBEBUILDER_ASSETS", func(t *testing.T) {
		dir := t.TempDir()
		t.Setenv("KUBEBUILDER_ASSETS", dir)
		_, err := AssetsDir()
		require.EqualError(t, err, "KUBEBUILDER_ASSETS: "+Check(dir).Error())
	})
	t.Run("cache", func(t *testing.T) {
		t.Setenv("KUBEBUILDER_ASSETS", "")
		require.NoError(t, os.Unsetenv("KUBEBUILDER_ASSETS"))
		t.Setenv("FXKUBE_CONTROLPLANE_CACHE", t.TempDir())
		_, err := AssetsDir()
		require.EqualError(t, err, Check(Dir()).Error())
	})
	t.Run("found", func(t *testing.T) {
		dir := t.TempDir()
		for _, name := range []string{APIServer, Etcd, Kubectl} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), nil, 0o755))
		}
		t.Setenv("KUBEBUILDER_ASSETS", dir)
		got, err := AssetsDir()
		require.NoError(t, err)
		assert.Equal(t, dir, got)
	})
}
