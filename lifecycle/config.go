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

	// StoreFailureTimeout is how long a store's list/watch may fail after
	// start before /readyz's "stores" check fails, naming the store, since
	// when and why. The store goes on serving what it held and retrying;
	// the check passes again once it works. Defaults to 5 minutes; a
	// negative value never fails the check.
	StoreFailureTimeout time.Duration

	// StopTimeout bounds how long runnables get to finish in-flight work
	// when the app stops. Defaults to 30 seconds.
	StopTimeout time.Duration

	// MetricsBindAddress is where /metrics is served. "0" disables it.
	// Defaults to ":8080".
	MetricsBindAddress string

	// MetricsSecure serves /metrics over HTTPS, and only to requests the
	// API server authenticates (TokenReview) and authorizes for get on the
	// /metrics non-resource URL (SubjectAccessReview), as kubebuilder
	// scaffolds it with controller-runtime's
	// metrics/filters.WithAuthenticationAndAuthorization. The certificate
	// is MetricsCert's, or self-signed when MetricsCert.Path is empty.
	MetricsSecure bool
	MetricsCert   CertFiles

	// PprofBindAddress is where net/http/pprof's endpoints are served
	// (/debug/pprof/...). "" or "0" (the default) disables them.
	PprofBindAddress string

	// Webhook configures the admission and conversion webhook server. It
	// runs only when a module registers a webhook.
	Webhook WebhookOptions

	// EnableHTTP2 lets the metrics and webhook servers speak HTTP/2. Off by
	// default, as in kubebuilder's scaffold, because of HTTP/2's Stream
	// Cancellation and Rapid Reset CVEs.
	EnableHTTP2 bool

	// TLS sets what the metrics and webhook servers accept in a TLS
	// handshake, as Kubernetes components' --tls-min-version and
	// --tls-cipher-suites do.
	TLS TLSOptions

	// HealthProbeBindAddress is where /healthz and /readyz are served. "0"
	// disables them. Defaults to ":8081".
	HealthProbeBindAddress string

	// LeaderElection, when enabled, runs runnables only on the replica
	// holding a Lease. Stores sync on every replica, so a standby takes
	// over warm.
	LeaderElection LeaderElection
}

// CertFiles names a TLS certificate and its key in a directory, which is
// watched: replaced files are served from the next handshake on
// (controller-runtime's certwatcher).
type CertFiles struct {
	// Path is the directory. Empty: a self-signed certificate for metrics;
	// for webhooks, controller-runtime's default
	// (<temp dir>/k8s-webhook-server/serving-certs).
	Path string
	// Name and Key are the file names. Default to tls.crt and tls.key.
	Name, Key string
}

// WebhookOptions configures the webhook server.
type WebhookOptions struct {
	// Port defaults to 9443; Host to all interfaces.
	Port int
	Host string
	Cert CertFiles
}

// LeaderElection configures leader election through a coordination.k8s.io
// Lease.
type LeaderElection struct {
	Enabled bool

	// Namespace and Name of the Lease. Name defaults to the app's name.
	// Namespace defaults, as in controller-runtime, to the pod's namespace
	// when the app runs in a cluster (read from the service account's
	// /var/run/secrets/kubernetes.io/serviceaccount/namespace); outside a
	// cluster, it is required when Enabled.
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
	def(&c.StoreFailureTimeout, 5*time.Minute)
	defs(&c.MetricsBindAddress, ":8080")
	defs(&c.HealthProbeBindAddress, ":8081")
	defs(&c.MetricsCert.Name, "tls.crt")
	defs(&c.MetricsCert.Key, "tls.key")
	defs(&c.Webhook.Cert.Name, "tls.crt")
	defs(&c.Webhook.Cert.Key, "tls.key")
	if c.Webhook.Port == 0 {
		c.Webhook.Port = 9443
	}
	def(&c.LeaderElection.LeaseDuration, 15*time.Second)
	def(&c.LeaderElection.RenewDeadline, 10*time.Second)
	def(&c.LeaderElection.RetryPeriod, 2*time.Second)
	return c
}
