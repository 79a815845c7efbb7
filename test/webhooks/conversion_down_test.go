package webhooks_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	v1 "github.com/fxkube/fxkube/test/webhooks/api/v1"
	v2 "github.com/fxkube/fxkube/test/webhooks/api/v2"
)

// A store of a kind whose conversion webhook does not answer cannot sync:
// its streamed initial list gets only "Too large resource version", which
// does not say why. The start's diagnosis lists one object plainly, and
// names the webhook and why it failed.
func TestConversionWebhookDownAtStart(t *testing.T) {
	hooks, _ := setUp(t, "conversion-down") // the webhook's server is never started
	const syncTimeout = 5 * time.Second
	app := testenv.App(t, testenv.Config(t), lifecycle.Config{SyncTimeout: syncTimeout}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)),
		fxstore.AddToScheme(v1.AddToScheme, v2.AddToScheme),
		fx.Invoke(func(r *fxstore.Registry) error {
			_, err := fxstore.For[*v2.Widget](r, fxstore.Spec{})
			return err
		}),
	)
	err := app.Start(t.Context())
	require.Error(t, err)
	t.Log(err)
	assert.Contains(t, err.Error(), "store Widget.webhooks.example.fxkube.io/v2 (all namespaces): not synced; last list/watch error: Timeout: Too large resource version")
	assert.Contains(t, err.Error(), "a plain list of one object says why")
	assert.Contains(t, err.Error(), "conversion webhook for webhooks.example.fxkube.io/v1, Kind=Widget failed")
	assert.Contains(t, err.Error(), fmt.Sprintf("https://%s:%d/convert", hooks.LocalServingHost, hooks.LocalServingPort), "the webhook's address")
	assert.Contains(t, err.Error(), "connection refused")
}

// A store of a kind whose conversion webhook goes down after it synced
// fails once, naming the webhook and why: its Err, its health handler,
// the log, and the readiness check once the bound has passed. Widgets made
// meanwhile are in the store once the webhook serves again, and it holds
// what the API server lists.
func TestConversionWebhookDownAfterStart(t *testing.T) {
	const ns = "conversion-down-after-start"
	hooks, c := setUp(t, ns)
	// Widgets made while the webhook is down are v1, the storage version,
	// which needs no conversion; the admission webhooks would refuse them.
	uninstallWebhooks(t, c, hooks)
	stopWebhook := serveConversion(t, hooks)
	core, logs := observer.New(zap.InfoLevel)
	log := zap.New(zapcore.NewTee(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Core(), core))
	probes := testenv.LoopbackAddr(t)
	const bound = time.Second // the store failure timeout
	var (
		widgets    *fxstore.Store[*v2.Widget]
		reconciled testenv.Records[string]
	)
	app := testenv.App(t, testenv.Config(t), lifecycle.Config{HealthProbeBindAddress: probes, SyncTimeout: timeout, StoreFailureTimeout: bound}, log,
		fxstore.AddToScheme(v1.AddToScheme, v2.AddToScheme),
		fxcontroller.Module,
		fxcontroller.Provide(func(r *fxstore.Registry) (*fxcontroller.Controller, error) {
			var err error
			if widgets, err = fxstore.For[*v2.Widget](r, fxstore.Spec{}); err != nil {
				return nil, err
			}
			return fxcontroller.New("widgets", widgets, reconcile.Func(func(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
				reconciled.Add(req.Name)
				return reconcile.Result{}, nil
			}))
		}),
	)
	app.RequireStart()
	defer app.RequireStop()
	var heard testenv.Records[error]
	_, err := widgets.Subscribe(fxstore.HandlerFuncs[*v2.Widget]{HealthFunc: heard.Add})
	require.NoError(t, err)
	_, err = widgets.Get(ns, "stored")
	require.NoError(t, err, "the store synced through the webhook")

	ctx := t.Context()
	create := func(name string) {
		t.Helper()
		require.NoError(t, c.Create(ctx, &v1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.WidgetSpec{Size: 2}}))
	}
	stopWebhook()
	stopped := time.Now()
	// The API server meets the webhook down when it must convert a Widget
	// for the store's watch.
	create("while-down-0")
	require.Eventually(t, func() bool { return widgets.Err() != nil }, faultBound, 100*time.Millisecond, "the store fails")
	detected := time.Since(stopped)
	webhookAddr := fmt.Sprintf("https://%s:%d/convert", hooks.LocalServingHost, hooks.LocalServingPort)
	failing := widgets.Err()
	t.Log(failing)
	assert.ErrorContains(t, failing, "store Widget.webhooks.example.fxkube.io/v2 (all namespaces): failing since")
	assert.ErrorContains(t, failing, "conversion webhook for webhooks.example.fxkube.io/v1, Kind=Widget failed")
	assert.ErrorContains(t, failing, webhookAddr, "the webhook's address")
	assert.ErrorContains(t, failing, "connection refused")
	told := logs.FilterMessageSnippet("store failing: its list/watch fails").All()
	require.Len(t, told, 1, "the failure is logged once")
	assert.Contains(t, told[0].ContextMap()["error"], webhookAddr)

	require.Eventually(t, func() bool { return readyz(probes) == http.StatusInternalServerError },
		bound+timeout, 100*time.Millisecond, "/readyz fails once the store has failed for longer than the bound")
	unready := logs.FilterMessageSnippet("store failing for longer than the store failure timeout").All()
	require.Len(t, unready, 1)
	assert.Contains(t, unready[0].ContextMap()["lastError"], webhookAddr, "the readiness check names the webhook")

	for i := 1; i <= 3; i++ {
		create(fmt.Sprintf("while-down-%d", i))
	}
	require.Len(t, heard.All(), 1, "the handler heard failing once, however often the store retried")
	stopWebhook = serveConversion(t, hooks)
	defer stopWebhook()
	restarted := time.Now()
	require.Eventually(t, func() bool { return widgets.Err() == nil }, faultBound, 100*time.Millisecond, "the store recovers")
	recovered := time.Since(restarted)
	require.Eventually(t, func() bool { return readyz(probes) == http.StatusOK }, timeout, 100*time.Millisecond, "/readyz passes again")

	// Nothing lost: the store holds what the API server lists.
	var listed, inStore map[string]string
	require.Eventually(t, func() bool {
		var list v2.WidgetList
		if err := c.List(ctx, &list); err != nil {
			return false
		}
		ws, err := widgets.List()
		if err != nil {
			return false
		}
		listed, inStore = map[string]string{}, map[string]string{}
		for i := range list.Items {
			listed[client.ObjectKeyFromObject(&list.Items[i]).String()] = list.Items[i].ResourceVersion
		}
		for _, w := range ws {
			inStore[client.ObjectKeyFromObject(w).String()] = w.ResourceVersion
		}
		return assert.ObjectsAreEqual(listed, inStore)
	}, timeout, 100*time.Millisecond, "the store holds what the API server lists")
	assert.Contains(t, inStore, ns+"/while-down-3")
	require.Eventually(t, func() bool {
		done := reconciled.All()
		for i := range 4 {
			if !slices.Contains(done, fmt.Sprintf("while-down-%d", i)) {
				return false
			}
		}
		return true
	}, timeout, 100*time.Millisecond, "every Widget made during the fault is reconciled")

	got := heard.All()
	require.Len(t, got, 2, "the handler heard failing and recovered, once each: %v", got)
	assert.ErrorContains(t, got[0], webhookAddr)
	assert.NoError(t, got[1])
	assert.Equal(t, 1, logs.FilterMessage("store recovered").Len())
	t.Logf("conversion webhook down after start: store failing %.1fs after the webhook stopped, recovered %.1fs after it started again",
		detected.Seconds(), recovered.Seconds())
}

// faultBound bounds how long a store takes to fail once its conversion
// webhook is down, and to recover once it serves again. kube-apiserver
// takes most of it: its watch cache of the converted version retries the
// webhook for about half a minute before it ends the store's watch, then
// refuses watches until it can list again.
const faultBound = 2 * time.Minute

// serveConversion serves the Widget conversion webhook where hooks says,
// apart from any app, so that a test can stop it and serve it again under
// a running app. Stop waits for the server to end; the test's end stops it
// too.
func serveConversion(t *testing.T, hooks envtest.WebhookInstallOptions) (stop func()) {
	t.Helper()
	srv := webhook.NewServer(webhook.Options{Host: hooks.LocalServingHost, Port: hooks.LocalServingPort, CertDir: hooks.LocalServingCertDir})
	srv.Register("/convert", conversion.NewWebhookHandler(scheme, conversion.NewRegistry()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		assert.NoError(t, <-done, "the webhook server ends")
	})
	t.Cleanup(stop)
	require.Eventually(t, func() bool { return srv.StartedChecker()(nil) == nil }, timeout, 20*time.Millisecond, "the webhook server serves")
	return stop
}

// readyz returns the status of the app's /readyz at probes, 0 if it did
// not answer.
func readyz(probes string) int {
	resp, err := http.Get("http://" + probes + "/readyz")
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
