// Package podnamespace reads the namespace of the pod the app runs in,
// which controller-runtime's leader election defaults its Lease's
// namespace to, as do fxkube's leader election and shards.
package podnamespace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Path is where Kubernetes mounts the namespace of a pod's service account.
const Path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Default returns namespace or, when it is empty, the pod's namespace read
// from path (Path in a cluster). who names what needs it, such as "leader
// election", and flag the flag that sets it, for the errors.
func Default(namespace, path, who, flag string) (string, error) {
	if namespace != "" {
		return namespace, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s needs the Leases' namespace, and the app runs outside a cluster (no pod namespace to default to): set --%s", who, flag)
	}
	if err != nil {
		return "", fmt.Errorf("read the pod's namespace for %s (or set --%s): %w", who, flag, err)
	}
	ns := strings.TrimSpace(string(b))
	if ns == "" {
		return "", fmt.Errorf("%s is empty: set --%s", path, flag)
	}
	return ns, nil
}
