package test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/modules/checksum"
	"github.com/fxkube/fxkube/modules/mirror"
	"github.com/fxkube/fxkube/modules/rollout"
)

// The example app run with --controllers=*,-mirror starts every
// controller but mirror's two: controller-runtime's metrics of a
// controller appear when it starts.
func TestExampleAppRunsTheControllersChosen(t *testing.T) {
	metrics, probes := testenv.LoopbackAddr(t), testenv.LoopbackAddr(t)
	cmd := app.Command("fxkube", rollout.Module, mirror.Module, checksum.Module) // cmd/app
	cmd.SetArgs([]string{"run", "--kubeconfig", testenv.KubeconfigPath(t), "--log-level", "warn",
		"--metrics-bind-address", metrics, "--metrics-secure=false", "--health-probe-bind-address", probes,
		"--shard-namespace", "default", "--controllers=*,-mirror"})
	ctx, cancel := context.WithCancel(t.Context())
	exited := make(chan error, 1)
	go func() { exited <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-exited:
			assert.NoError(t, err, "the app stops cleanly")
		case <-time.After(time.Minute):
			t.Error("the app did not stop")
		}
	}()
	require.Eventually(t, func() bool { return len(exited) > 0 || testenv.Status(probes, "/readyz") == http.StatusOK },
		time.Minute, 50*time.Millisecond, "the app becomes ready")
	require.Empty(t, exited, "the app exited")

	status, body := testenv.Get(metrics, "/metrics")
	require.Equal(t, http.StatusOK, status)
	for _, name := range []string{"rollout", "checksum"} {
		assert.Contains(t, body, `controller_runtime_active_workers{controller="`+name+`"}`, "%s runs", name)
	}
	for _, name := range []string{"mirror-configmaps", "mirror-secrets"} {
		assert.NotContains(t, body, `controller="`+name+`"`, "%s does not run", name)
	}
}
