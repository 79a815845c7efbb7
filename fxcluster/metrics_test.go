package fxcluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
)

func configMaps(n int) []client.Object {
	objs := make([]client.Object, n)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("cm-%d", i)}}
	}
	return objs
}

// runFleet starts a fleet of the members whose stores sources hold, by
// name, each with a ConfigMap store, and stops it when the test ends.
// Each member's host is https://<name>.invalid: no request leaves the
// process.
func runFleet(t *testing.T, sources map[ClusterName]*fxstoretest.Source) *Fleet {
	t.Helper()
	scheme, err := fxstore.NewScheme()
	require.NoError(t, err)
	hosts := map[string]*fxstoretest.Source{}
	for name, src := range sources {
		hosts["https://"+string(name)+".invalid"] = src
	}
	f := NewFleet(scheme, zaptest.NewLogger(t), Options{
		SyncTimeout: time.Second,
		Backoff:     wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1 << 30},
		NewSource:   func(c *connection.Connection) fxstore.Source { return hosts[c.Config.Host] },
		Providers: []Provider{ProviderFunc(func(ctx context.Context, clusters Aware) error {
			for name := range sources {
				if err := clusters.Engage(ctx, name, &rest.Config{Host: "https://" + string(name) + ".invalid"}); err != nil {
					return err
				}
			}
			<-ctx.Done()
			return nil
		})},
	})
	_, err = For[*corev1.ConfigMap](f, fxstore.Spec{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return f
}

// samples returns the values of the samples of the metric name that reg
// gathers, by their labels, as "cluster=east,state=ready".
func samples(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(labels, ",")] = value(m)
		}
	}
	return got
}

func value(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// Each member's state and attempts are metrics; so are its stores', next
// to the app's own, in one registry: a pedantic one, which checks every
// sample.
func TestMetricsPerCluster(t *testing.T) {
	scheme, err := fxstore.NewScheme()
	require.NoError(t, err)
	away := fxstoretest.NewSource(scheme)
	away.Fail(errors.New("forbidden"))
	f := runFleet(t, map[ClusterName]*fxstoretest.Source{
		"east": fxstoretest.NewSource(scheme, configMaps(1)...),
		"west": fxstoretest.NewSource(scheme, configMaps(2)...),
		"away": away,
	})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		states := map[ClusterName]State{}
		for _, info := range f.Clusters() {
			states[info.Name] = info.State
		}
		assert.Equal(c, map[ClusterName]State{"east": Ready, "west": Ready, "away": Failed}, states)
	}, 30*time.Second, 10*time.Millisecond)

	own := fxstore.NewRegistry(scheme)
	_, err = fxstore.For[*corev1.ConfigMap](own, fxstore.Spec{})
	require.NoError(t, err)
	fxstoretest.Start(t, own, fxstoretest.NewSource(scheme, configMaps(3)...))

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(own))
	require.NoError(t, reg.Register(clusterMetrics{f}))
	require.NoError(t, reg.Register(&storeMetrics{f: f}))

	got := samples(t, reg, "fxkube_cluster_state")
	for _, st := range states {
		for name, want := range map[string]State{"east": Ready, "west": Ready} {
			assert.Equal(t, map[bool]float64{true: 1, false: 0}[st == want], got["cluster="+name+",state="+string(st)], "%s %s", name, st)
		}
	}
	// Away fails, and tries again: the sample may be of either.
	assert.Equal(t, 1.0, got["cluster=away,state=failed"]+got["cluster=away,state=joining"])

	joins := samples(t, reg, "fxkube_cluster_joins_total")
	assert.Equal(t, 1.0, joins["cluster=east,result=joined"])
	assert.Equal(t, 0.0, joins["cluster=east,result=failed"])
	assert.Equal(t, 0.0, joins["cluster=away,result=joined"])
	assert.GreaterOrEqual(t, joins["cluster=away,result=failed"], 1.0)

	since := samples(t, reg, "fxkube_cluster_state_since_timestamp_seconds")
	assert.InDelta(t, float64(time.Now().Unix()), since["cluster=east"], 60)

	// The members' stores are told apart by their cluster; the app's own
	// have none.
	objects := samples(t, reg, "fxkube_store_objects")
	assert.Equal(t, 3.0, objects[`store=ConfigMap/v1 (all namespaces)`])
	assert.Equal(t, 1.0, objects[`cluster=east,store=ConfigMap/v1 (cluster "east", all namespaces)`])
	assert.Equal(t, 2.0, objects[`cluster=west,store=ConfigMap/v1 (cluster "west", all namespaces)`])
	started := samples(t, reg, "fxkube_stores_started_total")
	for _, labels := range []string{"", "cluster=east", "cluster=west"} {
		assert.Equal(t, 1.0, started[labels], "fxkube_stores_started_total{%s}", labels)
	}
}

// The process's collector of members' stores collects from the one fleet
// attached, and from none once it is detached.
func TestStoreMetricsAttach(t *testing.T) {
	scheme, err := fxstore.NewScheme()
	require.NoError(t, err)
	f := runFleet(t, map[ClusterName]*fxstoretest.Source{"east": fxstoretest.NewSource(scheme, configMaps(1)...)})
	require.Eventually(t, func() bool { _, err := f.GetCluster(t.Context(), "east"); return err == nil }, 30*time.Second, 10*time.Millisecond)
	other := NewFleet(scheme, nil, Options{})

	s := &storeMetrics{}
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(s))
	stores := func() []string {
		var keys []string
		for labels := range samples(t, reg, "fxkube_store_objects") {
			keys = append(keys, labels)
		}
		slices.Sort(keys)
		return keys
	}
	assert.Empty(t, stores())
	require.True(t, s.attach(f))
	require.False(t, s.attach(other), "a second fleet's members may have the same names")
	assert.Equal(t, []string{`cluster=east,store=ConfigMap/v1 (cluster "east", all namespaces)`}, stores())
	s.detach(other)
	assert.Len(t, stores(), 1, "detaching another fleet changes nothing")
	s.detach(f)
	assert.Empty(t, stores())
}
