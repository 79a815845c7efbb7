//go:build linux && local

package app_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/internal/controlplane"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// The local command, run in this process, exits 0 and stops its control
// plane however the app's run is cut short: by a signal that cancels its
// start (the app rolls back), or by the command's context ending once the
// app has started.
func TestLocalStopsWhenCutShort(t *testing.T) {
	dir, err := controlplane.AssetsDir()
	require.NoError(t, err)
	local := func(t *testing.T, ctx context.Context, probes string, modules ...fx.Option) {
		t.Helper()
		cmd := app.Command("fxkube-local", modules...)
		cmd.SetArgs([]string{"local", "--controlplane-dir", dir, "--metrics-bind-address", "0",
			"--health-probe-bind-address", probes, "--kubeconfig-out", filepath.Join(t.TempDir(), "kubeconfig")})
		exited := make(chan error, 1)
		go func() { exited <- cmd.ExecuteContext(ctx) }()
		select {
		case err := <-exited:
			require.NoError(t, err)
		case <-time.After(2 * time.Minute):
			t.Fatal("still running 2 minutes on")
		}
		for _, p := range testenv.Descendants(t, os.Getpid()) {
			assert.NotContains(t, []string{controlplane.Etcd, controlplane.APIServer}, p.Name, "left running: %+v", p)
		}
	}

	t.Run("a signal cancels the start", func(t *testing.T) {
		interrupt := fx.Invoke(func(lc fx.Lifecycle, interrupted lifecycle.Interrupt) {
			lc.Append(fx.StartHook(func() error {
				if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
					return err
				}
				<-interrupted // the signal cuts the start short
				return nil
			}))
		})
		local(t, t.Context(), testenv.LoopbackAddr(t), interrupt)
	})

	t.Run("the context ends once started", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		probes := testenv.LoopbackAddr(t)
		ready := make(chan struct{})
		go func() {
			for ctx.Err() == nil && testenv.Status(probes, "/readyz") != http.StatusOK {
				time.Sleep(50 * time.Millisecond)
			}
			if ctx.Err() == nil {
				close(ready)
			}
			cancel()
		}()
		local(t, ctx, probes)
		select {
		case <-ready:
		default:
			t.Fatal("local returned before the app was ready")
		}
	})
}
