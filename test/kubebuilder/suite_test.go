// Package kubebuilder_test runs a kubebuilder-style operator, laid out as
// kubebuilder lays out a project (api/v1, config/crd, internal/controller),
// against a real API server, once on each platform that can start it, with
// the same tests.
package kubebuilder_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/zapr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fxkube/fxkube/internal/testenv"
	batchv1 "github.com/fxkube/fxkube/test/kubebuilder/api/v1"
)

// scheme is the operator's scheme, built as a kubebuilder cmd/main.go
// builds it. Every platform runs the operator with it.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(batchv1.AddToScheme(scheme))
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(testenv.WithControlPlane(m),
		// The summary operator's own cache is controller-runtime's: its
		// metadata-only informers wrap each watch in watch.Filter, whose
		// goroutine stays blocked on an event in flight once the watch
		// stops (kubernetes/kubernetes#113254). fxkube's stores do not
		// use watch.Filter.
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*filteredWatch).loop"),
	)
}

// A platform runs the operator's Setup the way one kind of binary would and returns once it is running.
type platform struct {
	name  string
	start func(t *testing.T, cfg *rest.Config, setup func(ctrl.Manager) error) // runs until the test ends (t.Cleanup stops it and waits)
}

// platforms are the start-ups that TestTaskOperator runs the operator on,
// one after another. Each must run it with scheme, on all namespaces, as
// the admin that cfg is. A name prefixes the names of its tests'
// namespaces, so it must be valid in a DNS label.
var platforms = []platform{
	{"controller-runtime", startControllerRuntime},
	{"fxkube", startFxkube},
	{"fxkube-member", startFxkubeInMember},
}

// managerOptions are the manager's options, as a kubebuilder suite gives
// them: the operator's scheme, a logger, and no metrics or probe servers,
// which the tests do not read. Both platforms take them.
func managerOptions(t *testing.T) ctrl.Options {
	return ctrl.Options{
		Scheme:                 scheme,
		Logger:                 zapr.NewLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// A binary sets the operator up once, but this test binary does it
		// once per platform and -count, and controller-runtime refuses a
		// controller name that it has seen before in the process.
		Controller: config.Controller{SkipNameValidation: new(true)},
	}
}

// startControllerRuntime runs setup as a kubebuilder cmd/main.go does: on
// a controller-runtime manager.
func startControllerRuntime(t *testing.T, cfg *rest.Config, setup func(ctrl.Manager) error) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, managerOptions(t))
	require.NoError(t, err, "make the manager")
	require.NoError(t, setup(mgr), "set the operator up")

	ctx, cancel := context.WithCancel(t.Context())
	var runErr error
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		runErr = mgr.Start(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
		require.NoError(t, runErr, "run the manager")
	})
	select {
	case <-mgr.Elected():
	case <-stopped:
		t.Fatal("the manager stopped before it was elected") // the cleanup reports why
	}
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx), "the manager's cache syncs")
}

// installCRDs installs the operator's CRDs from config/crd/bases, as
// kubebuilder's suite_test.go has envtest do, and waits until they are
// served, which the API server does only once they are Established. A CRD
// that is there already is updated, so that a rerun (-count) may install
// them again.
func installCRDs(t *testing.T) {
	t.Helper()
	_, err := envtest.InstallCRDs(testenv.Config(t), envtest.CRDInstallOptions{
		Scheme:             scheme,
		Paths:              []string{filepath.Join("config", "crd", "bases")},
		ErrorIfPathMissing: true,
		MaxTime:            timeout,
	})
	require.NoError(t, err, "install the CRDs")
}

// newClient returns a client that reads from the API server directly, not
// from a cache, so that what a test sees is what the API server holds.
func newClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(testenv.Config(t), client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c
}

// timeout bounds each wait for the operator; tick is how often a test
// looks. Generous, for -race on a small machine.
const (
	timeout = 30 * time.Second
	tick    = 50 * time.Millisecond
)
