package fxcontroller_test

import (
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
)

// What a hosted operator's ctrl.Options hold that the app cannot honour
// fails fx.New, naming the field and what to use instead.
func TestWithManagerOptionsRefusals(t *testing.T) {
	widgets := k8sruntime.NewScheme()
	widgets.AddKnownTypeWithName(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, &corev1.ConfigMap{})
	tests := []struct {
		name string
		give manager.Options
		want string
	}{
		{"a scheme with kinds the app lacks", manager.Options{Scheme: widgets},
			"Scheme has kinds of example.com/v1, which the app's scheme lacks; add their AddToScheme functions with fxstore.AddToScheme"},
		{"a metrics server", manager.Options{Metrics: metricsserver.Options{BindAddress: ":8443", SecureServing: true}},
			`Metrics is a manager's own; the app serves /metrics: set the app's --metrics-bind-address, --metrics-secure, --metrics-cert-path, --tls-min-version, --tls-cipher-suites instead, and leave it unset (BindAddress "0" alone, no server, is taken)`},
		{"metrics TLS options, with no server", manager.Options{Metrics: metricsserver.Options{BindAddress: "0", TLSOpts: []func(*tls.Config){func(*tls.Config) {}}}},
			"Metrics is a manager's own"},
		{"a probe address", manager.Options{HealthProbeBindAddress: ":8081"},
			"HealthProbeBindAddress is a manager's own; the app serves /healthz and /readyz: set the app's --health-probe-bind-address instead"},
		{"probe paths", manager.Options{ReadinessEndpointName: "/ready"}, "ReadinessEndpointName or LivenessEndpointName is a manager's own"},
		{"pprof", manager.Options{PprofBindAddress: ":6060"}, "PprofBindAddress is a manager's own; set the app's --pprof-bind-address instead"},
		{"leader election", manager.Options{LeaderElection: true, LeaderElectionID: "ops.example.com"},
			"the app elects one leader for every operator: set the app's --leader-elect, --leader-election-id, --leader-election-namespace instead"},
		{"a lease's settings", manager.Options{LeaderElectionReleaseOnCancel: true}, "the app holds a coordination.k8s.io Lease through its one connection"},
		{"a shutdown timeout", manager.Options{GracefulShutdownTimeout: new(time.Minute)}, "GracefulShutdownTimeout is a manager's own; set the app's --stop-timeout instead"},
		{"a cache constructor", manager.Options{NewCache: crcache.New}, "NewCache is a manager's own; kinds are read from the app's stores"},
		{"a client constructor", manager.Options{NewClient: client.New}, "NewClient is a manager's own"},
		{"a sync timeout", manager.Options{Controller: config.Controller{CacheSyncTimeout: time.Minute}},
			"Controller.CacheSyncTimeout is the app's to set; every store syncs within --sync-timeout"},
		{"no warm-up", manager.Options{Controller: config.Controller{EnableWarmup: new(false)}}, "Controller.EnableWarmup=false is the app's to set"},
		{"a webhook server's address and files", manager.Options{WebhookServer: webhook.NewServer(webhook.Options{Port: 9443, CertDir: "/certs"})},
			"WebhookServer's CertDir, Port are the app's webhook server's: set the app's --webhook-port, --webhook-cert-path, --webhook-cert-name and --webhook-cert-key instead; keep only TLSOpts"},
		{"a webhook server of another kind", manager.Options{WebhookServer: otherServer{}},
			"WebhookServer is a fxcontroller_test.otherServer; the app has one webhook server"},
		{"a logger twice", manager.Options{Logger: funcr.New(func(string, string) {}, funcr.Options{})},
			"fxcontroller.WithManagerOptions(manager.Options{Logger: ...}) and fxcontroller.WithLogr(*funcr.fnlogger) each set the logger; give one"},
		{"cache options twice", manager.Options{Cache: crcache.Options{DefaultNamespaces: map[string]crcache.Config{"a": {}}}},
			"fxcontroller.WithManagerOptions(manager.Options{Cache: ...}) and fxcontroller.WithCacheOptions(cache.Options{...}) each set the cache options; give one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []fxcontroller.HostedOption{fxcontroller.WithName("ops"), fxcontroller.WithManagerOptions(tt.give)}
			switch tt.name {
			case "a logger twice":
				opts = append(opts, fxcontroller.WithLogr(funcr.New(func(string, string) {}, funcr.Options{})))
			case "cache options twice":
				opts = append(opts, fxcontroller.WithCacheOptions(crcache.Options{}))
			}
			err := buildHosted(t, lifecycle.Module, fxcontroller.SetupWithManager(setupConfigMaps("a"), opts...))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// otherServer is a webhook server that is not controller-runtime's.
type otherServer struct{ webhook.Server }

// The ctrl.Options of a kubebuilder suite, given as they are, are taken:
// the scheme is the app's, the logger is the operator's, the controller
// options reach its controllers, the servers it turns off are none of
// its own, and the webhook server's TLS options go to the app's webhook
// server, which serves the certificate they give from memory.
func TestWithManagerOptionsTakesWhatTheAppHonours(t *testing.T) {
	crt, key, err := certutil.GenerateSelfSignedCertKey("operator.example", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(crt, key)
	require.NoError(t, err)
	var out lines
	host, port, err := net.SplitHostPort(testenv.LoopbackAddr(t))
	require.NoError(t, err)
	webhookPort, err := strconv.Atoi(port)
	require.NoError(t, err)

	// Built as a kubebuilder cmd/main.go builds its scheme.
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))

	var mgr manager.Manager
	app := fxtest.New(t,
		fx.Supply(&rest.Config{Host: "https://unconnected.invalid"}),
		fxstore.Module,
		fx.Provide(func(s *k8sruntime.Scheme) fxstore.Source { return fxstoretest.NewSource(s) }),
		fxcontroller.Module,
		fxcontroller.SetupWithManager(func(m manager.Manager) error {
			mgr = m
			m.GetWebhookServer().Register("/hook", http.NotFoundHandler())
			return setupConfigMaps("configs")(m)
		}, fxcontroller.WithName("ops"), fxcontroller.WithManagerOptions(ctrl.Options{
			Scheme:                 scheme,
			Logger:                 funcr.New(out.add, funcr.Options{}),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Controller:             config.Controller{SkipNameValidation: new(true), RecoverPanic: new(false), MaxConcurrentReconciles: 3},
			WebhookServer: webhook.NewServer(webhook.Options{TLSOpts: []func(*tls.Config){
				func(c *tls.Config) {
					c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }
				},
			}}),
		})),
		lifecycle.Options(lifecycle.Config{MetricsBindAddress: "0", HealthProbeBindAddress: "0",
			Webhook: lifecycle.WebhookOptions{Host: host, Port: webhookPort}}),
	)
	require.NotNil(t, mgr)
	opts := mgr.GetControllerOptions()
	assert.False(t, *opts.RecoverPanic, "the operator's controller options reach its controllers")
	assert.Equal(t, 3, opts.MaxConcurrentReconciles)
	assert.True(t, *opts.EnableWarmup, "the app's own stay")
	mgr.GetLogger().Info("hello")
	assert.Contains(t, out.get(), `ops "level"=0 "msg"="hello"`, "the operator's logger")

	app.RequireStart()
	defer app.RequireStop()
	conn, err := tls.Dial("tcp", net.JoinHostPort(host, port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a self-signed test certificate
	require.NoError(t, err)
	defer conn.Close()
	assert.Equal(t, cert.Certificate[0], conn.ConnectionState().PeerCertificates[0].Raw, "the app's webhook server serves the operator's certificate")
}
