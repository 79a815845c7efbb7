package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
)

// These checks need no API server: they keep the workload honest (every
// system is built for the same specs and consumers) and the table right.

// offline is a config for an API server that is never contacted.
var offline = &rest.Config{Host: "https://127.0.0.1:1"}

func TestWorkloadShape(t *testing.T) {
	assert.Equal(t, distinctSpecs, len(variants)+2, "three ConfigMap variants, Secrets, Deployments")
	assert.Len(t, modules, consumersPerSpec, "every module asks for every spec")
	tests := []struct {
		give variant
		want int
	}{
		{front, 500},
		{back, 500},
		{all, 1000},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.give.count(1000), tt.give.name)
	}
	for i := range 40 {
		cm := newConfigMap(i)
		assert.Equal(t, front.has(i), mustSelector(front.selector).Matches(labels.Set(cm.Labels)), i)
		assert.Equal(t, back.has(i), mustSelector(back.selector).Matches(labels.Set(cm.Labels)), i)
		assert.True(t, mustSelector(all.selector).Matches(labels.Set(cm.Labels)), i)
		assert.True(t, mustSelector(everything).Matches(labels.Set(newSecret(i).Labels)), i)
		assert.True(t, mustSelector(everything).Matches(labels.Set(newDeployment(i).Labels)), i)
		assert.Equal(t, i, indexOf(cm.Name))
		assert.Equal(t, int32(1), versionOf(cm))
	}
	// Every namespace holds both tiers, so a List by label selects half.
	for ns := range namespaces {
		var fronts int
		for i := ns; i < 1000; i += namespaces {
			if front.has(i) {
				fronts++
			}
		}
		assert.Equal(t, 1000/namespaces/2, fronts, "namespace %d", ns)
	}
}

func TestFxkubeSharesEverySpec(t *testing.T) {
	sys, err := newFxkube(offline, newHarness(10))
	require.NoError(t, err)
	fx := sys.(*fxkubeSystem)
	stores := fx.registry.Stores()
	require.Len(t, stores, distinctSpecs)
	for _, s := range stores {
		assert.Len(t, s.Consumers, consumersPerSpec, s.Key)
	}
	assert.Equal(t, distinctSpecs*consumersPerSpec, fx.registry.Requests())
	assert.Len(t, fx.stores, distinctSpecs)
}

func TestInformersOpenOnePerConsumer(t *testing.T) {
	sys, err := newInformers(offline, newHarness(10))
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.stop(context.Background())) }()
	assert.Equal(t, distinctSpecs*consumersPerSpec, sys.informers())
	assert.Len(t, sys.(*informersSystem).stores, distinctSpecs)
}

func TestTracker(t *testing.T) {
	tr := newTracker(modules[0], 4)
	tr.expect(anyVersion, 2)
	tr.reconciled(0, 7)
	tr.reconciled(0, 1)  // again: counted once
	tr.reconciled(1, -1) // no version
	tr.reconciled(7, 1)  // not an object of the workload
	assert.Equal(t, int64(1), tr.pending.Load())
	tr.reconciled(2, 3)
	require.NoError(t, tr.waitDone(t.Context()))
	assert.NotZero(t, tr.doneAt.Load())

	tr.expect(9, 2)
	tr.reconciled(0, 8) // an old version
	tr.reconciled(0, 9)
	assert.Equal(t, int64(1), tr.pending.Load())
	tr.updated(8)
	tr.updated(9)
	assert.Equal(t, int64(1), tr.enqueued.Load())
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, tr.waitDone(ctx), context.DeadlineExceeded)
}

func TestParallel(t *testing.T) {
	var calls atomic.Int64
	require.NoError(t, parallel(t.Context(), 3, 103, 4, func(context.Context, int) error {
		calls.Add(1)
		return nil
	}))
	assert.Equal(t, int64(100), calls.Load())

	boom := errors.New("boom")
	err := parallel(t.Context(), 0, 1000, 4, func(_ context.Context, i int) error {
		if i == 10 {
			return boom
		}
		return nil
	})
	assert.ErrorIs(t, err, boom)
}

func TestCheckCounts(t *testing.T) {
	good := map[string]int{"configmaps/front": 10, "configmaps/back": 10, "configmaps/all": 20, "secrets": 20, "deployments": 20}
	require.NoError(t, checkCounts(good, 20))
	good["secrets"] = 19
	require.Error(t, checkCounts(good, 20))
}

func TestTable(t *testing.T) {
	r := &recorder{samples: make(map[sampleKey][]float64)}
	const n = 1000
	record := func(sys, metric string, vs ...float64) {
		for _, v := range vs {
			r.record(n, sys, metric, v)
		}
	}
	record(fxkube, mInformers, 5, 5, 5)
	record(controllerRuntime, mInformers, 5, 5, 5)
	record(plainInformers, mInformers, 15, 15, 15)
	record(fxkube, mSynced, 100, 130, 120) // median 120
	record(controllerRuntime, mSynced, 300)
	record(plainInformers, mSynced, 400)
	record(rawList, mRawSlowest, 100)
	record(rawList, mRawTogether, 110)
	record(fxkube, mHeapInuse, 10)
	record(controllerRuntime, mHeapInuse, 12)
	record(plainInformers, mHeapInuse, 20) // 0.5×: missed
	record(fxkube, mThroughput, 1000)
	record(controllerRuntime, mThroughput, 1000)
	record(fxkube, "Get-ConfigMap ns/op", 10)
	record(controllerRuntime, "Get-ConfigMap ns/op", 1000)
	record(crNoCopy, "Get-ConfigMap ns/op", 100)
	record(fxkube, "Get-ConfigMap allocs/op", 0)

	var out bytes.Buffer
	r.print(&out)
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		cells := strings.Split(l, "|")
		if len(cells) > 2 {
			lines[strings.TrimSpace(cells[1])] = l
		}
	}
	row := func(label string) []string {
		t.Helper()
		l, ok := lines[label]
		require.True(t, ok, "no row %q in\n%s", label, out.String())
		var cells []string
		for _, c := range strings.Split(l, "|")[2:9] {
			cells = append(cells, strings.TrimSpace(c))
		}
		return cells
	}
	assert.Equal(t, []string{"5", "5", "15", "1.000×", "0.333×", "fxkube = 5 specs, informers = 15", "yes"}, row("informers run"))
	assert.Equal(t, []string{"120", "300", "400", "0.400×", "0.300×", "", ""}, row("start → every store synced (ms)"))
	assert.Equal(t, []string{"1.20", "3.00", "4.00", "", "", "fxkube ≤ 1.30", "yes"}, row("synced ÷ slowest raw LIST"))
	assert.Equal(t, "**NO**", row("heap in use after sync + GC (MiB)")[6])
	assert.Equal(t, "yes", row("burst: reconciles/s draining the queues")[6])
	assert.Equal(t, []string{"10.0", "1000.0", "", "0.010×", "", "≤ 0.02× cr (50× faster)", "yes"}, row("Get ConfigMap (ns/op)"))
	assert.Equal(t, "0.100×", row("cr without deep copy (ns/op)")[3])
	assert.Equal(t, "yes", row("Get ConfigMap (allocs/op)")[6])
	assert.Contains(t, out.String(), "median of 3 run(s)")
}
