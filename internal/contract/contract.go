// Package contract names what fxkube's packages hand the app's
// lifecycle to run: the fx value groups it collects, and the warm-up
// contract of controller-runtime's manager.
package contract

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// RunnablesGroup is the fx value group of manager.Runnable values that
// lifecycle runs, grouped as controller-runtime's manager groups what it
// is given: servers before any store lists, caches with the stores (their
// sync is waited for), and the rest, controllers among them, after every
// store has synced (on the leader, when leader election is on, unless the
// runnable implements manager.LeaderElectionRunnable and returns false).
// The rest stop first.
const RunnablesGroup = "fxkube.runnables"

// ChecksGroup is the fx value group of lifecycle.Check values lifecycle
// serves on its probe endpoints.
const ChecksGroup = "fxkube.checks"

// ClusterProvidersGroup is the fx value group of fxcluster.Provider values
// the app starts: each engages the member clusters it finds.
const ClusterProvidersGroup = "fxkube.cluster-providers"

// WarmupRunnable is a runnable that starts part of its work before the app starts
// runnables: lifecycle calls Warmup once every store and cache has
// started, on every replica, and waits for it, with every store's sync,
// before it takes leadership and starts runnables. controller-runtime's
// controllers with EnableWarmup are such runnables (its manager's
// unexported warmupRunnable): they start their sources, and so ask for
// their stores, then.
type WarmupRunnable interface {
	Warmup(ctx context.Context) error
}

// ReadinessNoter is a runnable with something to tell on /readyz?verbose
// that does not fail readiness, such as a controller that waits for its
// kind to be served (fxcontroller.WhenServed). ReadinessNote returns ""
// when there is nothing to tell.
type ReadinessNoter interface {
	ReadinessNote() string
}

// NonGatingChecksGroup is the fx value group of NonGatingChecks values
// lifecycle serves on /readyz.
const NonGatingChecksGroup = "fxkube.non-gating-checks"

// NonGatingChecks returns, at each request to /readyz, the named checks of
// parts of the app that come and go, such as member clusters. Each part
// gates only itself: /readyz?verbose lists it, /readyz/<name> fails as
// its checker does, and /readyz itself never fails for it. A nil
// NonGatingChecks has none.
type NonGatingChecks func() map[string]healthz.Checker
