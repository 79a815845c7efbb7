package fxstore_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

func TestMetrics(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a"})
	require.NoError(t, err)
	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a"}, fxstore.WithConsumer("second"))
	require.NoError(t, err)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(r))

	src := fxstoretest.NewSource(clientgoscheme.Scheme, testenv.ConfigMap("a", "x"), testenv.ConfigMap("a", "y"), testenv.ConfigMap("b", "z"))
	fxstoretest.Start(t, r, src)

	store := `ConfigMap/v1 (namespace "a")`
	value := func(name string) float64 {
		t.Helper()
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				if slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "store" && l.GetValue() == store }) {
					if m.Counter != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no %s for %s", name, store)
		return 0
	}
	assert.Equal(t, 2.0, value("fxkube_store_objects"))
	assert.Positive(t, value("fxkube_store_bytes"))
	assert.Equal(t, 2.0, value("fxkube_store_received_total"))
	assert.Equal(t, 1.0, value("fxkube_store_synced"))
	assert.Equal(t, 2.0, value("fxkube_store_consumers"))
	assert.Equal(t, 0.0, value("fxkube_store_list_watch_errors_total"))
	assert.Positive(t, value("fxkube_store_sync_duration_seconds"))
	assert.Equal(t, 0.0, value("fxkube_store_started_late"))
	assert.Equal(t, 0.0, value("fxkube_store_view"))
	assert.Equal(t, 0.0, value("fxkube_store_failing"))
	assert.Equal(t, 0.0, value("fxkube_store_stale_seconds"))
	n, err := testutil.GatherAndCount(reg)
	require.NoError(t, err)
	assert.Equal(t, 14, n, "eleven series for the one store, and the registry's three counters")
	families, err := reg.Gather()
	require.NoError(t, err)
	counters := map[string]float64{}
	for _, f := range families {
		if name := f.GetName(); name == "fxkube_stores_started_total" || name == "fxkube_stores_released_total" || name == "fxkube_stores_moved_total" {
			counters[name] = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	assert.Equal(t, map[string]float64{"fxkube_stores_started_total": 1, "fxkube_stores_released_total": 0, "fxkube_stores_moved_total": 0}, counters)

	restore := src.Fail(apierrors.NewForbidden(corev1.Resource("configmaps"), "", errors.New("access revoked")))
	defer restore()
	require.Eventually(t, func() bool { return value("fxkube_store_failing") == 1 }, 10*time.Second, 10*time.Millisecond)
	assert.Positive(t, value("fxkube_store_stale_seconds"))
}
