package testenv

import (
	"testing"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/lifecycle"
)

// App returns an app on the API server cfg points at, as cfg's user,
// logging to log: fxstore.Module, lifecycle.Options(lc), then opts.
// The probe and metrics servers are off unless lc sets their addresses:
//
//	app := testenv.App(t, testenv.Config(t), lifecycle.Config{}, zaptest.NewLogger(t), fxcontroller.Module, rollout.Module)
//
// The root invokes of opts run after lifecycle's (see [lifecycle.Options]).
func App(tb testing.TB, cfg *rest.Config, lc lifecycle.Config, log *zap.Logger, opts ...fx.Option) *fxtest.App {
	tb.Helper()
	if lc.MetricsBindAddress == "" {
		lc.MetricsBindAddress = "0"
	}
	if lc.HealthProbeBindAddress == "" {
		lc.HealthProbeBindAddress = "0"
	}
	return fxtest.New(tb,
		fx.Supply(cfg, log),
		fxstore.Module,
		lifecycle.Options(lc),
		fx.Options(opts...),
	)
}
