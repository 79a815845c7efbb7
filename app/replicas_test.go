//go:build local

package app

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A replica that local starts runs as this process does: the same member
// clusters, contexts included, shared out the same way, and the same
// logging; its probes on the next port.
func TestReplicaArgsCarryWhatReplicasShare(t *testing.T) {
	a, cmd := parse(t, "--cluster-kubeconfig", "prod=/cfg@prod-admin", "--cluster-kubeconfig", "dev=/dev",
		"--shard-clusters", "--wait-for-clusters", "--cluster-secrets-namespace", "fleet", "--log-level", "debug",
		"--health-probe-bind-address", "127.0.0.1:8081")
	got := strings.Join(a.replicaArgs(cmd, 2, "/kubeconfig"), " ")
	for _, want := range []string{
		"run --kubeconfig /kubeconfig", "--health-probe-bind-address 127.0.0.1:8083",
		"--cluster-kubeconfig prod=/cfg@prod-admin", "--cluster-kubeconfig dev=/dev",
		"--shard-clusters=true", "--wait-for-clusters=true", "--cluster-secrets-namespace fleet",
		"--cluster-secrets-allow-credential-plugins=false", "--log-level=debug",
	} {
		assert.Contains(t, got, want)
	}

	replica, _ := parse(t, a.replicaArgs(cmd, 1, "/kubeconfig")[1:]...)
	assert.Equal(t, a.flags.clusterFiles, replica.flags.clusterFiles)
	assert.Equal(t, a.flags.clusterSecrets, replica.flags.clusterSecrets)
	assert.True(t, replica.flags.shardClusters)
	assert.True(t, replica.flags.waitForClusters)
}
