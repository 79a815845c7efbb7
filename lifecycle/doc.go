// Package lifecycle runs an fxkube app: it starts every store, waits until
// all have synced, and only then starts controllers, so no controller ever
// reconciles against a half-filled cache.
//
// Module adds fx hooks implementing the start and stop contract:
//
//	start: serve /healthz, /readyz and /metrics; serve the webhook
//	server (Webhooks) when a module registered a webhook, before any
//	store lists, since a conversion webhook may be what a store's list
//	waits for; pre-flight every
//	store (its kind is served; list and watch are allowed); start all
//	stores at once; warm up the runnables that ask for their stores only
//	as they start their sources (WarmupRunnable: hosted controller-runtime
//	controllers), whose stores start then, through the same pre-flight;
//	wait until all have synced, bounded by Config.SyncTimeout; acquire
//	leadership if enabled; start runnables (controllers); /readyz turns
//	200 once its Checks pass too.
//
//	stop: /readyz fails (500); runnables stop taking work and finish what
//	is in flight, bounded by Config.StopTimeout; leadership is released;
//	stores stop; the webhook server and the other servers close.
//
// A failure during start names every store that failed and why; the
// lifecycle undoes what it had started, and fx stops the hooks that started
// before it. An Interrupt, closed, cuts the lifecycle's start short the same
// way; the app package closes one on SIGINT and SIGTERM.
package lifecycle
