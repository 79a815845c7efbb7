// Package lifecycle runs an fxkube app: it starts every store, waits until
// all have synced, and only then starts controllers, so no controller ever
// reconciles against a half-filled cache.
//
// Module adds the fx hooks that carry out the start and stop contract.
//
// # Start
//
//  1. Serve /healthz, /readyz and /metrics.
//  2. Serve the webhook server (Webhooks) when a module registered a
//     webhook, and the servers modules added as runnables (a
//     manager.Server that needs no leader, a webhook.Server). They serve
//     before any store lists: a conversion webhook may be what a list
//     waits for.
//  3. Pre-flight every store (its kind is served; list and watch are
//     allowed) and start all stores at once.
//  4. Start the runnables that run a cache of their own (a cache.Cache, a
//     cluster.Cluster, anything with GetCache).
//  5. Warm up the runnables that ask for their stores only as they start
//     their sources (a Warmup(ctx) error method: hosted
//     controller-runtime controllers). Their stores start then, through
//     the same pre-flight.
//  6. Wait until every store and cache has synced and every warm-up is
//     done, bounded by Config.SyncTimeout.
//  7. Acquire leadership, if enabled.
//  8. Start the other runnables, controllers among them. /readyz turns
//     200 once its Checks pass too.
//
// This is the order of controller-runtime's manager, with two
// differences: the start waits for the sync of every cache, not only of
// those with GetCache, and runnables that need no leader start after the
// warm-ups rather than before.
//
// # Stop
//
//  1. /readyz fails (500).
//  2. Runnables stop taking work and finish what is in flight, bounded by
//     Config.StopTimeout.
//  3. Leadership is released.
//  4. Caches and stores stop.
//  5. The webhook server and the other servers close.
//
// # Run
//
// An fx app starts with App.Start, which returns once the app runs, and
// stops with App.Stop. Run does both, as a controller-runtime manager's
// Start does: it blocks until its context ends, then stops the app and
// returns its error. A test suite runs an app with it in one line:
//
//	go func() { err = lifecycle.Run(ctx, app) }()
//
// # Failures
//
// A failed start names every store, cache or warm-up that did not finish,
// and why. The lifecycle undoes what it had started, and fx stops the
// hooks that started before it. An Interrupt, closed, cuts the start
// short the same way; the app package closes one on SIGINT and SIGTERM.
package lifecycle
