package test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/lifecycle"
	"github.com/fxkube/fxkube/modules/fleet"
)

// staticProvider engages members once it starts; leave makes one of
// them leave.
func staticProvider(members map[fxcluster.ClusterName]*rest.Config) (_ fxcluster.Provider, leave func(fxcluster.ClusterName)) {
	var mu sync.Mutex
	cancels := map[fxcluster.ClusterName]context.CancelFunc{}
	provider := fxcluster.ProviderFunc(func(ctx context.Context, clusters fxcluster.Aware) error {
		for name, cfg := range members {
			memberCtx, cancel := context.WithCancel(ctx)
			mu.Lock()
			cancels[name] = cancel
			mu.Unlock()
			if err := clusters.Engage(memberCtx, name, cfg); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return nil
	})
	return provider, func(name fxcluster.ClusterName) {
		mu.Lock()
		defer mu.Unlock()
		cancels[name]()
	}
}

// startFleetApp starts an app of the fleet module on the app's own
// cluster, whose provider engages members, with lc's timeouts and
// endpoints and more options. It returns the fleet, and what makes a
// member leave; the app stops when the test ends.
func startFleetApp(t *testing.T, members map[fxcluster.ClusterName]*rest.Config, lc lifecycle.Config, level zapcore.Level, more ...fx.Option) (_ *fxcluster.Fleet, leave func(fxcluster.ClusterName)) {
	t.Helper()
	provider, leave := staticProvider(members)
	var f *fxcluster.Fleet
	lc.SyncTimeout = 20 * time.Second
	app := testenv.App(t, testenv.Config(t), lc, zaptest.NewLogger(t, zaptest.Level(level)),
		append([]fx.Option{fxcluster.Module, fxcluster.WithProvider(func() fxcluster.Provider { return provider }), fleet.Module, fx.Populate(&f)}, more...)...)
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	return f, leave
}

// An app running the fleet module on two members that work and one that
// no request reaches. /metrics has each member's state and its stores'
// series; /readyz?verbose lists each member, and the one that fails
// leaves the app ready; the running app's Graph lists the members. A
// member that leaves drops its series and its check.
func TestFleetIsOperable(t *testing.T) {
	cps := testenv.Members(t, 2)
	away := &rest.Config{Host: "https://" + testenv.LoopbackAddr(t), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	probes, metrics := testenv.LoopbackAddr(t), testenv.LoopbackAddr(t)
	var reg *fxstore.Registry
	f, leave := startFleetApp(t, map[fxcluster.ClusterName]*rest.Config{"east": cps[0].Config, "west": cps[1].Config, "away": away},
		lifecycle.Config{HealthProbeBindAddress: probes, MetricsBindAddress: metrics}, zap.InfoLevel, fx.Populate(&reg))

	const copies = `ConfigMap/v1 (cluster \"%s\", all namespaces, labels \"fxkube.io/fleet-copy=true\")`
	series := func(format, cluster string) string {
		return strings.ReplaceAll(format, "%s", cluster)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, body := testenv.Get(metrics, "/metrics")
		if !assert.Equal(c, 200, status) {
			return
		}
		for _, want := range []string{
			`fxkube_cluster_state{cluster="east",state="ready"} 1`,
			`fxkube_cluster_state{cluster="east",state="failed"} 0`,
			`fxkube_cluster_state{cluster="west",state="ready"} 1`,
			`fxkube_cluster_state{cluster="away",state="failed"} 1`,
			`fxkube_cluster_joins_total{cluster="east",result="joined"} 1`,
			`fxkube_cluster_joins_total{cluster="east",result="failed"} 0`,
			`fxkube_cluster_joins_total{cluster="away",result="joined"} 0`,
			`fxkube_store_synced{cluster="east",store="` + series(copies, "east") + `"} 1`,
			`fxkube_store_synced{cluster="west",store="` + series(copies, "west") + `"} 1`,
			`fxkube_stores_started_total{cluster="east"} 1`,
			`fxkube_store_synced{store="ConfigMap/v1 (all namespaces, labels \"fxkube.io/fleet=true\")"} 1`,
		} {
			assert.Contains(c, body, want+"\n")
		}
	}, time.Minute, 100*time.Millisecond)

	// Away fails alone: the app is ready, and says which member is not.
	status, body := testenv.Get(probes, "/readyz?verbose")
	assert.Equal(t, 200, status, body)
	for _, want := range []string{"[+]cluster-away excluded: ok\n", "[+]cluster-east ok\n", "[+]cluster-west ok\n", "[+]stores ok\n", "healthz check passed\n"} {
		assert.Contains(t, body, want)
	}
	status, body = testenv.Get(probes, "/readyz/cluster-away")
	assert.Equal(t, 500, status)
	assert.Contains(t, body, `cluster "away" `)
	assert.Contains(t, body, away.Host, "the cause names the member's server")
	assert.Equal(t, 200, testenv.Status(probes, "/readyz/cluster-east"))

	// The Graph of the running app lists the members.
	g := app.NewGraph(reg, nil, nil)
	g.AddClusters(f)
	require.NotNil(t, g.Clusters)
	byName := map[string]app.Member{}
	for _, m := range g.Clusters.Members {
		byName[m.Name] = m
	}
	require.Len(t, byName, 3)
	east := byName["east"]
	assert.Equal(t, "ready", east.State)
	assert.Equal(t, cps[0].Config.Host, east.Host)
	assert.Equal(t, 1, east.Attempts)
	if assert.Len(t, east.Stores, 1) {
		assert.Equal(t, series(strings.ReplaceAll(copies, `\"`, `"`), "east"), east.Stores[0].Key)
		assert.Equal(t, []string{fleet.Controller}, east.Stores[0].Controllers)
	}
	if m := byName["away"]; m.State == "failed" {
		assert.Contains(t, m.Error, away.Host)
	}
	var text strings.Builder
	g.WriteText(&text)
	assert.Contains(t, text.String(), "\nMember clusters:\n  away (")
	assert.Contains(t, text.String(), "  east ("+cps[0].Config.Host+"): ready since ")

	// West leaves: its series and its check go.
	leave("west")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, body := testenv.Get(metrics, "/metrics")
		assert.NotContains(c, body, `cluster="west"`)
		assert.Contains(c, body, `cluster="east"`)
		_, body = testenv.Get(probes, "/readyz?verbose")
		assert.NotContains(c, body, "cluster-west")
		assert.Contains(c, body, "[+]cluster-east ok\n")
	}, time.Minute, 100*time.Millisecond)
	assert.Equal(t, 404, testenv.Status(probes, "/readyz/cluster-west"))
	assert.Equal(t, 200, testenv.Status(probes, "/readyz"))
	assert.True(t, slices.ContainsFunc(f.Clusters(), func(i fxcluster.ClusterInfo) bool { return i.Name == "east" }))
}

// An app with the fleet module and no providers has a fleet of no
// clusters: it starts and is ready, with no member check and no cluster
// series, and its fleet never runs.
func TestFleetWithoutProvidersRunsNothing(t *testing.T) {
	probes, metrics := testenv.LoopbackAddr(t), testenv.LoopbackAddr(t)
	var f *fxcluster.Fleet
	running := testenv.App(t, testenv.Config(t),
		lifecycle.Config{HealthProbeBindAddress: probes, MetricsBindAddress: metrics},
		zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		fxcluster.Module,
		fleet.Module,
		fx.Populate(&f),
	)
	running.RequireStart()
	defer running.RequireStop()

	status, body := testenv.Get(probes, "/readyz?verbose")
	assert.Equal(t, 200, status, body)
	assert.NotContains(t, body, "cluster-")
	status, body = testenv.Get(metrics, "/metrics")
	require.Equal(t, 200, status)
	for _, unwanted := range []string{"fxkube_cluster_", `cluster="`} {
		assert.False(t, strings.Contains(body, unwanted), "/metrics has %s", unwanted)
	}
	assert.Contains(t, body, `fxkube_store_synced{store="ConfigMap/v1 (all namespaces, labels \"fxkube.io/fleet=true\")"} 1`)
	err := f.Engage(t.Context(), "east", testenv.Config(t))
	require.ErrorContains(t, err, "the fleet is not running", "the lifecycle never started the fleet")
	assert.Empty(t, f.Clusters())
}
