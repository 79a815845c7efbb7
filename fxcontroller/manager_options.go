package fxcontroller

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// WithManagerOptions gives a hosted operator (SetupWithManager) the
// ctrl.Options its cmd/main.go or suite passed to ctrl.NewManager, as
// they are. What the app can honour is taken:
//   - Scheme, when the app's scheme has every kind it has (add them with
//     fxstore.AddToScheme);
//   - Cache and Client, as WithCacheOptions and WithClientOptions take
//     them;
//   - Logger, as WithLogr takes it;
//   - Controller's MaxConcurrentReconciles and NeedLeaderElection, as
//     WithMaxConcurrentReconciles and WithLeaderElection take them, and
//     its GroupKindConcurrency, RecoverPanic, UsePriorityQueue and
//     ReconciliationTimeout, which its controllers get;
//   - WebhookServer, a webhook.NewServer whose only options are TLSOpts:
//     they go to the app's webhook server (see lifecycle.WebhookTLS);
//   - Metrics.BindAddress, HealthProbeBindAddress and PprofBindAddress
//     "0", which ask for no server: a hosted operator has none of its own.
//
// Anything else the options hold would be a manager's own: a server, an
// election, a connection. It fails fx.New, naming the field and what to
// use instead (most often a flag of the app). Nothing is dropped in
// silence. An option given both here and on its own (Logger and
// WithLogr) fails too.
func WithManagerOptions(opts manager.Options) HostedOption {
	return newOption(func(o *options) { o.applyManagerOptions(opts) }, "fxcontroller.WithManagerOptions(manager.Options{...})")
}

// managerCall names WithManagerOptions's field in errors and conflicts.
func managerCall(field string) string {
	return "fxcontroller.WithManagerOptions(manager.Options{" + field + ": ...})"
}

// managerOptions are what WithManagerOptions takes that only host can
// apply: it needs the app's scheme and the manager's controller options.
type managerOptions struct {
	scheme     *k8sruntime.Scheme
	controller config.Controller // the fields passed to the controllers
}

func (o *options) applyManagerOptions(m manager.Options) {
	refuse := func(set bool, field, instead string) {
		if set {
			o.errs = append(o.errs, fmt.Errorf("WithManagerOptions: %s is a manager's own; %s", field, instead))
		}
	}
	o.manager = &managerOptions{scheme: m.Scheme}
	if !reflect.ValueOf(m.Cache).IsZero() {
		o.cacheOptions = &m.Cache
		o.sets("the cache options", managerCall("Cache"))
	}
	if !reflect.ValueOf(m.Client).IsZero() {
		o.clientOptions = &m.Client
		o.sets("the client options", managerCall("Client"))
	}
	if m.Logger.GetSink() != nil {
		o.logr = &m.Logger
		o.sets("the logger", managerCall("Logger"))
	}
	o.applyControllerOptions(m.Controller)
	o.applyWebhookServer(m.WebhookServer)

	flags := func(names ...string) string {
		return "set the app's " + strings.Join(names, ", ") + " instead, and leave it unset"
	}
	refuse(m.MapperProvider != nil, "MapperProvider", "the app's one connection has the REST mapper; leave it unset")
	refuse(m.NewCache != nil, "NewCache", "kinds are read from the app's stores; leave it unset, and give cache options in Cache")
	refuse(m.NewClient != nil, "NewClient", "the client reads from the app's stores and writes through its one connection; give client options in Client")
	o.applyMetrics(m.Metrics, refuse, flags)
	refuse(m.HealthProbeBindAddress != "" && m.HealthProbeBindAddress != "0", "HealthProbeBindAddress",
		"the app serves /healthz and /readyz: "+flags("--health-probe-bind-address")+"; add checks with mgr.AddHealthzCheck and mgr.AddReadyzCheck")
	refuse(m.ReadinessEndpointName != "" || m.LivenessEndpointName != "", "ReadinessEndpointName or LivenessEndpointName",
		"the app's probes are /readyz and /healthz; leave them unset")
	refuse(m.PprofBindAddress != "" && m.PprofBindAddress != "0", "PprofBindAddress", flags("--pprof-bind-address"))
	refuse(m.LeaderElection || m.LeaderElectionID != "" || m.LeaderElectionNamespace != "" ||
		m.LeaseDuration != nil || m.RenewDeadline != nil || m.RetryPeriod != nil,
		"leader election (LeaderElection, LeaderElectionID, LeaderElectionNamespace, LeaseDuration, RenewDeadline, RetryPeriod)",
		"the app elects one leader for every operator: "+flags("--leader-elect", "--leader-election-id", "--leader-election-namespace")+
			"; keep a controller off the election with fxcontroller.WithLeaderElection(false)")
	refuse(m.LeaderElectionResourceLock != "" || m.LeaderElectionResourceLockInterface != nil || m.LeaderElectionConfig != nil ||
		m.LeaderElectionReleaseOnCancel || len(m.LeaderElectionLabels) > 0,
		"how the leader is elected (LeaderElectionResourceLock, LeaderElectionResourceLockInterface, LeaderElectionConfig, LeaderElectionReleaseOnCancel, LeaderElectionLabels)",
		"the app holds a coordination.k8s.io Lease through its one connection, and releases it on stop; leave them unset")
	refuse(m.GracefulShutdownTimeout != nil, "GracefulShutdownTimeout", flags("--stop-timeout"))
	refuse(m.BaseContext != nil, "BaseContext", "runnables get the app's context; leave it unset")
	refuse(m.EventBroadcaster != nil, "EventBroadcaster", "events go through the app's recorders (mgr.GetEventRecorder); leave it unset") //nolint:staticcheck // deprecated, and refused: an operator may still set it
}

// applyControllerOptions takes what the manager's controller options
// hold: the app's own settings, or what its controllers get.
func (o *options) applyControllerOptions(c config.Controller) {
	if c.MaxConcurrentReconciles > 0 {
		o.maxConcurrent = c.MaxConcurrentReconciles
		o.sets("the concurrent reconciles", managerCall("Controller.MaxConcurrentReconciles"))
	}
	if c.NeedLeaderElection != nil {
		o.leaderElection = *c.NeedLeaderElection
		o.sets("leader election", managerCall("Controller.NeedLeaderElection"))
	}
	refuse := func(set bool, field, instead string) {
		if set {
			o.errs = append(o.errs, fmt.Errorf("WithManagerOptions: Controller.%s is the app's to set; %s", field, instead))
		}
	}
	refuse(c.CacheSyncTimeout != 0, "CacheSyncTimeout", "every store syncs within --sync-timeout; set that flag instead, and leave it unset")
	refuse(c.EnableWarmup != nil && !*c.EnableWarmup, "EnableWarmup=false",
		"controllers warm up so that their stores sync with every other before any controller starts; leave it unset")
	refuse(c.Logger.GetSink() != nil, "Logger", "controllers log through the operator's logger: set Logger, or fxcontroller.WithLogr")
	// SkipNameValidation needs no setting: the app checks names per app.
	o.manager.controller = config.Controller{
		GroupKindConcurrency:  c.GroupKindConcurrency,
		RecoverPanic:          c.RecoverPanic,
		UsePriorityQueue:      c.UsePriorityQueue,
		ReconciliationTimeout: c.ReconciliationTimeout,
	}
}

// applyWebhookServer takes a webhook server built by webhook.NewServer
// whose only options are TLSOpts: they go to the app's webhook server,
// which serves every operator's webhooks.
func (o *options) applyWebhookServer(s webhook.Server) {
	if isNil(s) {
		return
	}
	srv, ok := s.(*webhook.DefaultServer)
	if !ok {
		o.errs = append(o.errs, fmt.Errorf("WithManagerOptions: WebhookServer is a %T; the app has one webhook server, on which mgr.GetWebhookServer registers: "+
			"leave it unset, or serve yours on a port of its own with mgr.Add", s))
		return
	}
	w := srv.Options
	var own []string
	for field, set := range map[string]bool{
		"Host": w.Host != "", "Port": w.Port != 0, "CertDir": w.CertDir != "", "CertName": w.CertName != "", "KeyName": w.KeyName != "",
		"ClientCAName": w.ClientCAName != "", "WebhookMux": w.WebhookMux != nil,
	} {
		if set {
			own = append(own, field)
		}
	}
	if len(own) > 0 {
		slices.Sort(own)
		o.errs = append(o.errs, fmt.Errorf("WithManagerOptions: WebhookServer's %s are the app's webhook server's: set the app's --webhook-port, --webhook-cert-path, --webhook-cert-name and --webhook-cert-key instead; keep only TLSOpts",
			strings.Join(own, ", ")))
	}
	o.webhookTLS = append(o.webhookTLS, w.TLSOpts...)
}

// applyMetrics takes metrics options that ask for no server: a hosted
// operator has none of its own.
func (o *options) applyMetrics(m metricsserver.Options, refuse func(bool, string, string), flags func(...string) string) {
	if m.BindAddress == "0" {
		m.BindAddress = ""
	}
	refuse(!reflect.ValueOf(m).IsZero(), "Metrics", "the app serves /metrics: "+
		flags("--metrics-bind-address", "--metrics-secure", "--metrics-cert-path", "--tls-min-version", "--tls-cipher-suites")+
		" (BindAddress \"0\" alone, no server, is taken)")
}

// checkScheme reports the kinds own knows that app, the app's scheme,
// does not, by group and version.
func checkScheme(own, app *k8sruntime.Scheme) error {
	if own == nil || own == app {
		return nil
	}
	missing := map[schema.GroupVersion]bool{}
	for gvk := range own.AllKnownTypes() {
		if gvk.Version != k8sruntime.APIVersionInternal && !app.Recognizes(gvk) {
			missing[gvk.GroupVersion()] = true
		}
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for gv := range missing {
		names = append(names, gv.String())
	}
	slices.Sort(names)
	return fmt.Errorf("WithManagerOptions: Scheme has kinds of %s, which the app's scheme lacks; add their AddToScheme functions with fxstore.AddToScheme",
		strings.Join(names, ", "))
}
