package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Versions of the binaries build.sh builds. They must equal the versions
// required in test/controlplane/go.mod; a test keeps them in step.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.0"
)

// Names of the binaries in [Dir].
const (
	APIServer = "kube-apiserver"
	Etcd      = "etcd"
	Kubectl   = "kubectl"
)

// Dir returns the directory build.sh builds the binaries into:
//
//	${FXKUBE_CONTROLPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fxkube/controlplane}/kubernetes-<version>-etcd-<version>
//
// As in the shell, an empty variable counts as unset. Dir does not check
// that the directory exists; see [Check].
func Dir() string {
	root := os.Getenv("FXKUBE_CONTROLPLANE_CACHE")
	if root == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			// Not os.UserCacheDir: build.sh uses $HOME/.cache, and this must
			// name the same directory.
			cache = os.Getenv("HOME") + "/.cache"
		}
		root = filepath.Join(cache, "fxkube", "controlplane")
	}
	return filepath.Join(root, "kubernetes-"+KubernetesVersion+"-etcd-"+EtcdVersion)
}

// AssetsDir returns the directory of the binaries for tests: the one
// KUBEBUILDER_ASSETS names, as for envtest, when it is set (even to ""), and
// otherwise [Dir]. It returns an error, as [Check] does, when binaries are
// missing there.
func AssetsDir() (string, error) {
	dir, ok := os.LookupEnv("KUBEBUILDER_ASSETS")
	if !ok {
		dir = Dir()
	}
	if err := Check(dir); err != nil {
		if ok {
			return "", fmt.Errorf("KUBEBUILDER_ASSETS: %w", err)
		}
		return "", err
	}
	return dir, nil
}

// Check returns an error naming every control-plane binary that is missing
// from dir or not executable, and how to build them.
func Check(dir string) error {
	var bad []string
	for _, name := range []string{APIServer, Etcd, Kubectl} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			bad = append(bad, name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("control plane binaries missing or not executable in %s: %s; run `make controlplane` to build them",
		dir, strings.Join(bad, ", "))
}
