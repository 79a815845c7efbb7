package fxcluster

import (
	"errors"
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/zap"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/internal/contract"
	"github.com/fxkube/fxkube/lifecycle"
)

// Module provides the app's *Fleet, and runs it and the controllers that
// Provide adds under the app's lifecycle. Its providers are those
// WithProvider adds: without any, it runs nothing. It needs the app's
// scheme; it takes the sync and stop timeouts from the app's
// lifecycle.Config. The app package's apps include it: do not add it
// to them again.
//
// Each member is the /readyz check CheckName(name), which never fails
// the app's readiness, and has metrics labelled cluster: fxkube_cluster_*
// and its stores' fxkube_store_*.
var Module = fx.Module("fxcluster",
	fx.Provide(newFleet, runnables,
		fx.Annotate(readiness, fx.ResultTags(`group:"`+contract.NonGatingChecksGroup+`"`))),
	fx.Invoke(registerMetrics),
)

// Provide adds the controller across member clusters that constructor
// returns, as a *Controller and an error, to the app. Its parameters come
// from the app, as fx.Provide's do.
func Provide(constructor any) fx.Option {
	return fx.Provide(fx.Annotate(constructor, fx.ResultTags(`group:"fxkube.cluster-controllers"`)))
}

// WithProvider adds the Provider that constructor returns to the fleet's.
// Its parameters come from the app, as fx.Provide's do.
func WithProvider(constructor any) fx.Option {
	return fx.Provide(fx.Annotate(constructor, fx.As(new(Provider)), fx.ResultTags(`group:"fxkube.cluster-providers"`)))
}

type fleetParams struct {
	fx.In

	Scheme *k8sruntime.Scheme
	Logger *zap.Logger      `optional:"true"`
	Config lifecycle.Config `optional:"true"`
	// Options, when supplied, configure the fleet; their timeouts default
	// to Config's, and the providers are the group's too.
	Options   Options    `optional:"true"`
	Providers []Provider `group:"fxkube.cluster-providers"`
	// Connection is the app's, for the Leases of Options.Share.
	Connection *connection.Connection `optional:"true"`
}

func newFleet(p fleetParams) (*Fleet, error) {
	log := p.Logger
	if log != nil {
		log = log.Named("fxcluster")
	}
	o := p.Options
	if o.SyncTimeout <= 0 {
		o.SyncTimeout = p.Config.SyncTimeout
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = p.Config.StopTimeout
	}
	o.Providers = append(o.Providers, p.Providers...)
	// No namespace for the Leases fails the start, not describe or rbac.
	var nsErr error
	if o.Share != nil && o.Leases == nil {
		var share fxshard.Config
		share, nsErr = fxshard.DefaultNamespace(*o.Share, "sharing member clusters out")
		if p.Connection == nil {
			return nil, errors.New("fxcluster: Options.Share needs the app's connection, or Options.Leases")
		}
		leases, err := fxshard.LeaseClient(p.Connection, share)
		if err != nil {
			return nil, fmt.Errorf("share member clusters out: %w", err)
		}
		o.Share, o.Leases = &share, leases
	}
	f := NewFleet(p.Scheme, log, o)
	if nsErr != nil && f.coordinatorErr == nil {
		f.coordinatorErr = nsErr
	}
	return f, nil
}

type runnablesParams struct {
	fx.In

	Fleet       *Fleet
	Controllers []*Controller `group:"fxkube.cluster-controllers"`
}

type runnablesResult struct {
	fx.Out

	Runnables []manager.Runnable `group:"fxkube.runnables,flatten"`
}

// runnables are what the lifecycle runs: the fleet, on every replica,
// and its controllers, on the leader or, when the fleet shares its
// members out, on every replica.
func runnables(p runnablesParams) runnablesResult {
	// Without providers no member ever joins: the fleet and its
	// controllers would only wait, so nothing runs.
	if len(p.Fleet.opts.Providers) == 0 {
		return runnablesResult{}
	}
	rns := []manager.Runnable{p.Fleet, elected{p.Fleet}}
	for _, c := range p.Controllers {
		rns = append(rns, c)
	}
	return runnablesResult{Runnables: rns}
}
