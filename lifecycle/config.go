package lifecycle

import (
	"time"
)

// Config configures how an app starts, serves probes and stops. The zero
// value means every default.
type Config struct {
	// SyncTimeout bounds the wait for every store's initial sync.
	// Defaults to 2 minutes.
	SyncTimeout time.Duration

	// StopTimeout bounds how long runnables get to finish in-flight work
	// when the app stops. Defaults to 30 seconds.
	StopTimeout time.Duration

	// MetricsBindAddress is where /metrics is served. "0" disables it.
	// Defaults to ":8080".
	MetricsBindAddress string

	// HealthProbeBindAddress is where /healthz and /readyz are served. "0"
	// disables them. Defaults to ":8081".
	HealthProbeBindAddress string

	// LeaderElection, when enabled, runs runnables only on the replica
	// holding a Lease. Stores sync on every replica, so a standby takes
	// over warm.
	LeaderElection LeaderElection
}

// LeaderElection configures leader election through a coordination.k8s.io
// Lease.
type LeaderElection struct {
	Enabled bool

	// Namespace and Name of the Lease. Name defaults to the app's name;
	// Namespace is required when Enabled.
	Namespace string
	Name      string

	// Identity of this replica. Defaults to hostname_<random>.
	Identity string

	// LeaseDuration, RenewDeadline and RetryPeriod tune the election as in
	// client-go's leaderelection. Default to 15s, 10s and 2s.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	defs := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.SyncTimeout, 2*time.Minute)
	def(&c.StopTimeout, 30*time.Second)
	defs(&c.MetricsBindAddress, ":8080")
	defs(&c.HealthProbeBindAddress, ":8081")
	def(&c.LeaderElection.LeaseDuration, 15*time.Second)
	def(&c.LeaderElection.RenewDeadline, 10*time.Second)
	def(&c.LeaderElection.RetryPeriod, 2*time.Second)
	return c
}
