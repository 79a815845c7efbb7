package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
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
	sys, err := newFxkube(offline, newHarness(modules, 10))
	require.NoError(t, err)
	fx := sys.(*fxkubeSystem)
	stores := fx.registry.Stores()
	require.Len(t, stores, distinctSpecs)
	for _, s := range stores {
		assert.Len(t, s.Consumers, consumersPerSpec, s.Key)
	}
	assert.Equal(t, distinctSpecs*consumersPerSpec, requests(fx.registry))
	assert.Len(t, fx.stores, distinctSpecs)
	assert.Equal(t, broadestSpecs, fx.informers(), "the front and back ConfigMaps are views of all of them")
}

// The harness's requests and the hosted operators' caches resolve to the
// same two stores, and each operator consumes the Secret store (its index)
// at build; it asks for ConfigMaps once its controller starts.
func TestHostedOperatorsShareStores(t *testing.T) {
	w := hosting(3)
	sys, err := newHostedFxkube(offline, newHarness(w.controllers, 10))
	require.NoError(t, err)
	fx := sys.(*fxkubeSystem)
	stores := fx.registry.Stores()
	require.Len(t, stores, 2, "one store per kind")
	assert.Len(t, fx.stores, len(w.stores(10)))
	for _, s := range stores {
		if s.Key.Kind.Kind != "Secret" {
			continue
		}
		assert.Subset(t, s.Consumers, []string{"op1", "op2", "op3"})
		// The operators index the field with one function: one index.
		indexes := slices.DeleteFunc(slices.Clone(s.Indexes), func(ix string) bool {
			return !strings.HasPrefix(ix, fxstore.FieldIndexName(secretConfigMapKey))
		})
		assert.Len(t, indexes, 1, "Secrets are indexed once by %s: %q", secretConfigMapKey, s.Indexes)
	}
}

func TestInformersOpenOnePerConsumer(t *testing.T) {
	sys, err := newInformers(offline, newHarness(modules, 10))
	require.NoError(t, err)
	defer func() { require.NoError(t, sys.stop(context.Background())) }()
	assert.Equal(t, distinctSpecs*consumersPerSpec, sys.informers())
	assert.Len(t, sys.(*informersSystem).stores, distinctSpecs)
}

// The overlap workload's specs select what their predicates say, in every
// spelling, and each family's members are inside its broadest spec; the
// kinds the workload populates are its first five.
func TestOverlapWorkloadShape(t *testing.T) {
	const n = 300 // every shard, team and namespace; the names specs select
	objectsOf := map[*overlapKind]func(i int) client.Object{
		&configMapsKind:      func(i int) client.Object { return newConfigMap(i) },
		&secretsKind:         func(i int) client.Object { return newSecret(i) },
		&deploymentsKind:     func(i int) client.Object { return newDeployment(i) },
		&serviceAccountsKind: func(i int) client.Object { return newServiceAccount(i) },
		&servicesKind:        func(i int) client.Object { return newHeadlessService(i) },
	}
	for k, kind := range overlapKinds {
		_, ok := objectsOf[kind]
		assert.Equal(t, k < 5, kind.populated, kind.gvr.Resource)
		assert.Equal(t, ok, kind.populated, kind.gvr.Resource)
	}
	made := make(map[*overlapKind][]client.Object)
	for kind, newObject := range objectsOf {
		for i := range n {
			made[kind] = append(made[kind], newObject(i))
		}
	}
	names := make(map[string]bool)
	for _, f := range overlapFamilies {
		for _, s := range append([]overlapSpec{f.broadest}, f.members...) {
			assert.False(t, names[s.name()], "%s: written twice", s.name())
			names[s.name()] = true
			assert.Same(t, f.broadest.kind, s.kind, s.name())
			assert.True(t, s.metadata || !f.broadest.metadata, "%s: a metadata-only store holds no typed objects", s.name())
			assert.Contains(t, []string{"", s.namespace}, f.broadest.namespace, s.name())
			objs, ok := made[s.kind]
			if !ok {
				continue
			}
			fieldSel := fields.ParseSelectorOrDie(s.fields)
			for _, spelling := range s.labels {
				labelSel := mustSelector(spelling)
				for i, obj := range objs {
					fieldSet := fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()}
					if secret, ok := obj.(*corev1.Secret); ok {
						fieldSet["type"] = string(secret.Type)
					}
					selected := (s.namespace == "" || s.namespace == obj.GetNamespace()) &&
						labelSel.Matches(labels.Set(obj.GetLabels())) && fieldSel.Matches(fieldSet)
					if selected != s.has(i) {
						t.Fatalf("%s spelt %q: selects object %d: %t; its predicate says %t", s.name(), spelling, i, selected, s.has(i))
					}
				}
			}
			for i := range n {
				if s.has(i) && !f.broadest.has(i) {
					t.Fatalf("%s selects object %d, which its family's %s does not", s.name(), i, f.broadest.name())
				}
			}
		}
	}
}

// Every variant's fxkube app plans one informer per family, by construction
// of the families; every other store is a view. Fewer modules make fewer
// requests over the same broadest specs.
func TestOverlapPlansOneInformerPerFamily(t *testing.T) {
	for _, v := range overlapVariants {
		t.Run(v.String(), func(t *testing.T) {
			p := v.plan()
			require.Len(t, p.modules, v.Modules)
			sys, err := p.newFxkube(offline, newHarness(nil, 0))
			require.NoError(t, err)
			fx := sys.(*fxkubeSystem)
			assert.Equal(t, p.requests(), requests(fx.registry))
			infos := make(map[fxstore.Key]fxstore.StoreInfo)
			for _, info := range fx.registry.Stores() {
				infos[info.Key] = info
			}
			assert.Len(t, infos, len(p.specs()))
			assert.Equal(t, len(p.families), fx.informers())
			broadest := make(map[string]bool)
			for _, s := range p.broadest() {
				broadest[s.name()] = true
			}
			for _, s := range p.specs() {
				st, ok := fx.stores[s.name()]
				require.True(t, ok, s.name())
				info := infos[st.(interface{ Key() fxstore.Key }).Key()]
				assert.Equal(t, broadest[s.name()], info.ViewOf == nil, "%s: view of %v", s.name(), info.ViewOf)
			}
		})
	}
	fifty, five := overlapVariants[0].plan(), overlapVariants[1].plan()
	assert.Equal(t, len(fifty.families), len(five.families))
	assert.Equal(t, fifty.accessTargets(), five.accessTargets())
	assert.Greater(t, fifty.requests(), 5*five.requests(), "many more requests")
	assert.Greater(t, overlapVariants[2].plan().accessTargets(), fifty.accessTargets(), "more resources")
	assert.Equal(t, fifty.accessTargets()-1, fifty.reviewTargets(), "Deployments in one namespace are reviewed in all")
}

func TestRequestClass(t *testing.T) {
	tests := []struct {
		method, url string
		want        string
	}{
		{"GET", "/api", sentDiscovery},
		{"GET", "/apis", sentDiscovery},
		{"GET", "/api/v1", sentDiscovery},
		{"GET", "/apis/apps/v1", sentDiscovery},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", sentAccessReview},
		{"POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", sentIdentityCheck},
		{"GET", "/api/v1/configmaps?labelSelector=app%3Dx&watch=true&sendInitialEvents=true", sentWatch},
		{"GET", "/apis/apps/v1/namespaces/a/deployments?limit=500", sentRead},
		{"PATCH", "/api/v1/namespaces/a/configmaps/b", sentOther},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, tt.url, nil)
		assert.Equal(t, tt.want, requestClass(req), "%s %s", tt.method, tt.url)
	}
	assert.Equal(t, 3, preflight(map[string]int{sentDiscovery: 1, sentAccessReview: 2, sentWatch: 5}))
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
	require.NoError(t, checkCounts(good, sharedStores(20)))
	good["secrets"] = 19
	require.Error(t, checkCounts(good, sharedStores(20)))
}

// tableRows parses a printed table: by section title, by row label, the
// cells after the label.
func tableRows(out string) map[string]map[string][]string {
	sections := map[string]map[string][]string{}
	var current map[string][]string
	for _, l := range strings.Split(out, "\n") {
		cells := strings.Split(l, "|")
		if len(cells) < 3 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		label := cells[1]
		if title, ok := strings.CutPrefix(label, "**"); ok {
			current = map[string][]string{}
			sections[strings.TrimSuffix(title, "**")] = current
			continue
		}
		if current != nil {
			current[label] = cells[2 : len(cells)-1]
		}
	}
	return sections
}

func TestTable(t *testing.T) {
	r := &recorder{samples: make(map[sampleKey][]float64)}
	const n = 1000
	record := func(sys, metric string, vs ...float64) {
		for _, v := range vs {
			r.record(n, sys, metric, v)
		}
	}
	record(fxkube, mInformers, 3, 3, 3)
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
	record(fxkube, "Hosted-Get-ConfigMap ns/op", 3500)
	record(controllerRuntime, "Hosted-Get-ConfigMap ns/op", 2500)

	// The hosting workload: one operator, then three.
	one, three := func(sys string) string { return hostedName(1, sys) }, func(sys string) string { return hostedName(3, sys) }
	record(one(fxkube), mSynced, 50)
	record(one(controllerRuntime), mSynced, 60)
	record(one(fxkube), mHeapInuse, 9.9)
	record(one(controllerRuntime), mHeapInuse, 10)
	record(one(fxkube), mThroughput, 940)
	record(one(controllerRuntime), mThroughput, 1000) // 0.94×: missed
	record(three(fxkube), mSynced, 50)
	record(three(fxkube), mInformers, 2)
	record(three(controllerRuntime), mInformers, 6)
	record(three(fxkube), mOpenWatches, 2)
	record(three(controllerRuntime), mOpenWatches, 5) // not 3×
	record(three(fxkube), mHeapInuse, 12)
	record(three(controllerRuntime), mHeapInuse, 30)

	// The overlap workload, two variants: the first the targets are for.
	over := func(v overlapVariant, sys string) string { return overlapName(v, sys) }
	fifty, five := overlapVariants[0], overlapVariants[1]
	broadest, targets := len(fifty.plan().families), fifty.plan().reviewTargets()
	for _, v := range []overlapVariant{fifty, five} {
		record(over(v, fxkube), mSynced, 300)
		record(over(v, fxkube), mInformers, float64(broadest))
		record(over(v, plainInformers), mInformers, float64(broadest))
		record(over(v, fxkube), mAccessReviews, float64(2*targets))
	}
	record(over(fifty, fxkube), mDiscovery, 2)
	record(over(five, fxkube), mDiscovery, 1) // fewer than aggregated discovery takes: missed
	record(over(fifty, fxkube), mOverhead, 30, 70, 40)
	record(over(fifty, fxkube), mCPUOverhead, 90)
	record(over(fifty, fxkube), mStartup, 330)
	record(over(fifty, plainInformers), mStartup, 300)

	var out bytes.Buffer
	r.print(&out)
	sections := tableRows(out.String())
	row := func(section, label string) []string {
		t.Helper()
		cells, ok := sections[section][label]
		require.True(t, ok, "no row %q in section %q of\n%s", label, section, out.String())
		return cells
	}
	const systems, reads = "N = 1000", "store reads, N = 1000 (cr: cached client, deep copies by default)"
	assert.Equal(t, []string{"3", "5", "15", "0.600×", "0.200×", "fxkube = 3 broadest specs, informers = 15", "yes"}, row(systems, "informers run"))
	assert.Equal(t, []string{"120", "300", "400", "0.400×", "0.300×", "", ""}, row(systems, "start → every store synced (ms)"))
	assert.Equal(t, []string{"1.20", "3.00", "4.00", "", "", "fxkube ≤ 1.30", "yes"}, row(systems, "synced ÷ slowest raw LIST"))
	assert.Equal(t, "**NO**", row(systems, "heap in use after sync + GC (MiB)")[6])
	assert.Equal(t, "yes", row(systems, "burst: reconciles/s draining the queues")[6])
	assert.Equal(t, []string{"10.0", "1000.0", "", "0.010×", "", "≤ 0.02× cr (50× faster)", "yes"}, row(reads, "Get ConfigMap (ns/op)"))
	assert.Equal(t, "0.100×", row(reads, "cr without deep copy (ns/op)")[3])
	assert.Equal(t, "yes", row(reads, "Get ConfigMap (allocs/op)")[6])
	assert.Equal(t, []string{"3500.0", "2500.0", "", "1.400×", "", "", ""}, row(reads, "hosted client: Get ConfigMap (ns/op)"))

	oneOp, threeOps := hostingTitle(n, 1), hostingTitle(n, 3)
	assert.Equal(t, []string{"9.9", "10.0", "", "0.990×", "", "≤ 1.00× cr", "yes"}, row(oneOp, "heap in use after sync + GC (MiB)"))
	assert.Equal(t, []string{"940", "1000", "", "0.940×", "", "≥ 0.95× cr", "**NO**"}, row(oneOp, "burst: reconciles/s draining the queue"))
	assert.Equal(t, []string{"2", "6", "", "0.333×", "", "fxkube = cr ÷ 3", "yes"}, row(threeOps, "informers run"))
	assert.Equal(t, "**NO**", row(threeOps, "WATCH requests open at the API server")[6])
	assert.Equal(t, []string{"12.0", "30.0", "", "0.400×", "", "≤ 0.40× cr", "yes"}, row(threeOps, "heap in use after sync + GC (MiB)"))
	assert.NotContains(t, sections[threeOps], "burst: reconciles/s draining the queue", "three operators run no burst")
	overFifty, overFive := overlapTitle(n, fifty), overlapTitle(n, five)
	assert.Equal(t, []string{strconv.Itoa(broadest), "", strconv.Itoa(broadest), "", "1.000×", fmt.Sprintf("= %d broadest specs", broadest), "yes"},
		row(overFifty, "informers run"))
	assert.Equal(t, "yes", row(overFifty, "SelfSubjectAccessReviews")[6])
	assert.Equal(t, []string{"2", "", "", "", "", fmt.Sprintf("2 to %d (1 + informers)", 1+broadest), "yes"}, row(overFifty, "discovery"))
	assert.Equal(t, "**NO**", row(overFive, "discovery")[6])
	assert.Equal(t, []string{"40.0", "", "", "", "", "< 50 ms", "yes"}, row(overFifty, "fxkube: beyond the sync = build + Start − slowest informer (ms)"))
	assert.Equal(t, "1.100×", row(overFifty, "build → controllers may start (ms)")[4])
	assert.Equal(t, "90.0", row(overFifty, "fxkube's CPU − informers', by pair (ms)")[0])
	assert.NotContains(t, sections, overlapTitle(n, overlapVariants[2]), "a variant not run has no section")
	assert.Contains(t, out.String(), "median of 3 run(s)")
}

// requests counts the requests for stores the registry served: one
// consumer each.
func requests(r *fxstore.Registry) int {
	n := 0
	for _, s := range r.Stores() {
		n += len(s.Consumers)
	}
	return n
}
