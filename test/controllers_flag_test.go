package test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/modules/checksum"
	"github.com/fxkube/fxkube/modules/mirror"
	"github.com/fxkube/fxkube/modules/rollout"
)

// The example app run with --controllers=*,-mirror starts every
// controller but mirror's two, as its metrics of controllers say.
func TestExampleAppRunsTheControllersChosen(t *testing.T) {
	metrics, probes := testenv.LoopbackAddr(t), testenv.LoopbackAddr(t)
	runUntilReady(t, app.Command("fxkube", rollout.Module, mirror.Module, checksum.Module), probes, // cmd/app
		"run", "--kubeconfig", testenv.KubeconfigPath(t), "--log-level", "warn",
		"--metrics-bind-address", metrics, "--metrics-secure=false", "--health-probe-bind-address", probes,
		"--shard-namespace", "default", "--controllers=*,-mirror")

	status, body := testenv.Get(metrics, "/metrics")
	require.Equal(t, http.StatusOK, status)
	// fxkube's controller metrics are the running app's own; those of
	// controller-runtime keep series of every app the process ran.
	for _, name := range []string{"rollout", "checksum"} {
		assert.Contains(t, body, `fxkube_controller_state{controller="`+name+`",state="running"} 1`, "%s runs", name)
	}
	for _, name := range []string{"mirror-configmaps", "mirror-secrets"} {
		assert.NotContains(t, body, `fxkube_controller_state{controller="`+name+`"`, "%s does not run", name)
	}
}
