package share

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/internal/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// decoded returns pod as an informer holds it: decoded from protobuf,
// sharing nothing with pod or any other object.
func decoded(t testing.TB, pod *corev1.Pod) *corev1.Pod {
	raw, err := pod.Marshal()
	require.NoError(t, err)
	out := &corev1.Pod{}
	require.NoError(t, out.Unmarshal(raw))
	return out
}

func podsOf(t testing.TB, d *appsv1.Deployment, n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = decoded(t, workload.Pod(d, i))
	}
	return pods
}

// The replicas of a Deployment share what they repeat, and each still
// equals what it was.
func TestTakeSharesWhatReplicasRepeat(t *testing.T) {
	pods := podsOf(t, workload.Deployment("shop", 1, 3), 3)
	want := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		want[i] = p.DeepCopy()
	}
	table := New(cache.NewStore(cache.MetaNamespaceKeyFunc))
	for _, p := range pods {
		table.Take(p)
	}
	for i := range pods {
		requireEqual(t, want[i], pods[i], "pod %d is unchanged", i)
	}
	a, b := pods[0], pods[1]
	// Each container mounts the Pod's own token volume, so the containers
	// differ, but what they repeat is shared.
	assert.NotSame(t, unsafe.SliceData(a.Spec.Containers), unsafe.SliceData(b.Spec.Containers), "containers")
	assert.Same(t, unsafe.SliceData(a.Spec.Containers[0].Env), unsafe.SliceData(b.Spec.Containers[0].Env), "env")
	assert.Same(t, a.Spec.Containers[0].LivenessProbe, b.Spec.Containers[0].LivenessProbe, "probes")
	assert.Same(t, unsafe.SliceData(a.Spec.Tolerations), unsafe.SliceData(b.Spec.Tolerations), "tolerations")
	assert.Same(t, a.Spec.SecurityContext, b.Spec.SecurityContext, "pod security context")
	assert.Same(t, unsafe.SliceData(a.OwnerReferences), unsafe.SliceData(b.OwnerReferences), "owner references")
	assert.True(t, sameMap(a.Labels, b.Labels), "labels")
	assert.True(t, sameMap(a.Annotations, b.Annotations), "annotations")
	assert.Same(t, unsafe.StringData(a.Namespace), unsafe.StringData(b.Namespace), "strings")
	// Within one object too: both containers' security contexts.
	assert.Same(t, a.Spec.Containers[0].SecurityContext, a.Spec.Containers[1].SecurityContext, "within an object")
	// What differs stays apart.
	assert.NotSame(t, unsafe.SliceData(a.Status.PodIPs), unsafe.SliceData(b.Status.PodIPs), "pod IPs")
	assert.NotSame(t, unsafe.SliceData(a.Spec.Volumes), unsafe.SliceData(b.Spec.Volumes), "volumes: the token volume's name differs")
	assert.Same(t, a.Spec.Volumes[0].ConfigMap, b.Spec.Volumes[0].ConfigMap, "but the volumes that repeat are shared")
	// A shared slice has no room to append into.
	assert.Equal(t, len(b.Spec.Containers), cap(b.Spec.Containers))
}

// requireEqual compares as the API does: a quantity's cached form aside.
func requireEqual(t *testing.T, want, got any, msgAndArgs ...any) {
	t.Helper()
	if !equality.Semantic.DeepEqual(want, got) {
		require.Equal(t, want, got, msgAndArgs...)
	}
}

func sameMap[K comparable, V any](a, b map[K]V) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

// Parts are shared only when equal in every bit: never on a hash, never
// across nil and empty, 0 and -0, or two spellings of a quantity.
func TestTakeSharesOnlyEqualParts(t *testing.T) {
	base := workload.Pod(workload.Deployment("shop", 1, 2), 0)
	for _, tt := range []struct {
		name   string
		change func(*corev1.Pod)
		apart  func(a, b *corev1.Pod) bool
	}{{
		name:   "env value",
		change: func(p *corev1.Pod) { p.Spec.Containers[0].Env[1].Value = "debug" },
		apart: func(a, b *corev1.Pod) bool {
			return unsafe.SliceData(a.Spec.Containers[0].Env) != unsafe.SliceData(b.Spec.Containers[0].Env)
		},
	}, {
		name:   "nil and empty args",
		change: func(p *corev1.Pod) { p.Spec.Containers[1].Command = []string{} },
		apart: func(a, b *corev1.Pod) bool {
			return (a.Spec.Containers[1].Command == nil) != (b.Spec.Containers[1].Command == nil)
		},
	}, {
		name:   "nil and empty node selector",
		change: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{} },
		apart: func(a, b *corev1.Pod) bool {
			return (a.Spec.NodeSelector == nil) != (b.Spec.NodeSelector == nil)
		},
	}, {
		name: "1 and 1000m",
		change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1000m")
		},
		apart: func(a, b *corev1.Pod) bool {
			return !sameMap(a.Spec.Containers[0].Resources.Requests, b.Spec.Containers[0].Resources.Requests)
		},
	}} {
		// b is taken as another object, then as an update of a: compared
		// with a first.
		for _, update := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/update=%t", tt.name, update), func(t *testing.T) {
				a, b := base.DeepCopy(), base.DeepCopy()
				a.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
				b.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1")
				tt.change(b)
				wantA, wantB := a.DeepCopy(), b.DeepCopy()
				store := cache.NewStore(cache.MetaNamespaceKeyFunc)
				table := New(store)
				table.Take(a)
				if update {
					require.NoError(t, store.Add(a))
				}
				table.Take(b)
				requireEqual(t, wantA, a)
				requireEqual(t, wantB, b)
				assert.True(t, tt.apart(a, b), "the changed part is not shared")
				assert.Same(t, a.Spec.SecurityContext, b.Spec.SecurityContext, "what is equal still is")
			})
		}
	}
}

// Unstructured objects, as the dynamic client decodes them, share their
// nested maps, slices and strings; numbers keep their bits.
func TestTakeSharesUnstructured(t *testing.T) {
	objs := make([]*unstructured.Unstructured, 2)
	for i := range objs {
		raw := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w-%d","namespace":"shop"},
			"spec":{"size":3,"ratio":-0.0,"tags":["a","b"],"template":{"image":"registry.example.com/app:1","env":{"A":"1"}}}}`, i)
		objs[i] = &unstructured.Unstructured{}
		require.NoError(t, json.Unmarshal([]byte(raw), &objs[i].Object))
	}
	want := []*unstructured.Unstructured{objs[0].DeepCopy(), objs[1].DeepCopy()}
	table := New(cache.NewStore(cache.MetaNamespaceKeyFunc))
	for _, o := range objs {
		table.Take(o)
	}
	assert.Equal(t, want[0], objs[0])
	assert.Equal(t, want[1], objs[1])
	specs := []map[string]any{objs[0].Object["spec"].(map[string]any), objs[1].Object["spec"].(map[string]any)}
	assert.True(t, sameMap(specs[0], specs[1]), "spec")
	assert.True(t, math.Signbit(specs[0]["ratio"].(float64)), "-0 stays -0")
	meta := []map[string]any{objs[0].Object["metadata"].(map[string]any), objs[1].Object["metadata"].(map[string]any)}
	assert.False(t, sameMap(meta[0], meta[1]), "metadata differs by name")
	ns := []string{meta[0]["namespace"].(string), meta[1]["namespace"].(string)}
	assert.Same(t, unsafe.StringData(ns[0]), unsafe.StringData(ns[1]))
}

// Taking an object twice, as client-go does in a streamed list, leaves it
// as it is, even once the table holds other copies of its parts: its
// parts may be shared by then, and must not be written.
func TestTakeTwice(t *testing.T) {
	pods := podsOf(t, workload.Deployment("shop", 1, 2), 2)
	table := New(cache.NewStore(cache.MetaNamespaceKeyFunc))
	table.Take(pods[0])
	containers := unsafe.SliceData(pods[0].Spec.Containers)
	// As if rebuilt without pods[0]: the equal pods[1] now holds the
	// canonical copies.
	table.pool.reset()
	table.Take(pods[1])
	require.NotSame(t, containers, unsafe.SliceData(pods[1].Spec.Containers))
	table.Take(pods[0])
	assert.Same(t, containers, unsafe.SliceData(pods[0].Spec.Containers), "pods[0] was not written")
}

// Under churn the table holds about what the objects still held need: it
// rebuilds once half of what it holds may be garbage. Its estimate of a
// deleted object's garbage is an average, so it may hold up to three
// times what a table built from today's objects holds. Every object
// still equals what it was taken as, while readers read them.
func TestChurn(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	table := New(store)
	rng := rand.New(rand.NewPCG(1, 2))
	deployments := make([]*appsv1.Deployment, 20)
	for i := range deployments {
		deployments[i] = workload.Deployment("shop", i, 50)
	}
	want := map[string]*corev1.Pod{} // by key, as taken

	// Readers copy and compare what they read, as controllers would,
	// while the table takes and rebuilds.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, obj := range store.List() {
					_ = obj.(*corev1.Pod).DeepCopy()
				}
			}
		})
	}

	for step := range 6000 {
		d := deployments[rng.IntN(len(deployments))]
		pod := workload.Pod(d, rng.IntN(60))
		key := pod.Namespace + "/" + pod.Name
		switch rng.IntN(4) {
		case 0: // deleted
			if old, ok := want[key]; ok {
				held, _, err := store.GetByKey(key)
				require.NoError(t, err)
				require.NoError(t, store.Delete(old))
				table.Dropped(held)
				delete(want, key)
			}
			continue
		case 1: // its status changed
			pod.Status.PodIP = fmt.Sprintf("10.9.%d.%d", step/256%256, step%256)
			pod.Status.PodIPs = []corev1.PodIP{{IP: pod.Status.PodIP}}
		}
		pod.ResourceVersion = fmt.Sprint(step)
		obj := decoded(t, pod)
		want[key] = obj.DeepCopy()
		table.Take(obj)
		require.NoError(t, store.Update(obj))
		table.Held(obj)
	}
	close(stop)
	readers.Wait()
	rebuilds := table.pool.generation
	require.Positive(t, rebuilds, "churn rebuilt the table")

	for key, pod := range want {
		got, ok, err := store.GetByKey(key)
		require.NoError(t, err)
		require.True(t, ok, key)
		requireEqual(t, pod, got, "%s equals what it was taken as", key)
	}
	fresh := New(store)
	for _, obj := range store.List() {
		fresh.pool.register(obj)
	}
	t.Logf("%d objects, %d rebuilds: the table holds %d parts; one built from the objects holds %d", len(want), rebuilds, table.Len(), fresh.Len())
	assert.LessOrEqual(t, table.Len(), 3*fresh.Len())
	assert.Empty(t, table.pool.taken, "the objects held are not in flight")
	n := len(want)
	t.Logf("heap estimated: %d B; for a table built from the objects, %d B; unshared, %d B", table.Bytes(n), fresh.Bytes(n), sizes(store.List()))
	assert.LessOrEqual(t, table.Bytes(n), 3*fresh.Bytes(n))
	assert.Less(t, fresh.Bytes(n), sizes(store.List())/2, "sharing halves the heap at least")
}

func sizes(objs []any) int64 {
	var n int64
	for _, o := range objs {
		n += Size(o)
	}
	return n
}

// Times are hashed by their instant, so that distinct times do not pile
// up as candidates of one hash: each take would compare with them all.
// Equal times are shared.
func TestTimesHashByInstant(t *testing.T) {
	type stamped struct {
		At    *metav1.Time
		Micro *metav1.MicroTime
	}
	table := New(cache.NewStore(cache.MetaNamespaceKeyFunc))
	base := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	objs := make([]*stamped, 200)
	for i := range objs {
		at := metav1.NewTime(base.Add(time.Duration(i%100) * time.Second))
		micro := metav1.NewMicroTime(base.Add(time.Duration(i%100) * time.Microsecond))
		objs[i] = &stamped{At: &at, Micro: &micro}
		table.Take(objs[i])
	}
	assert.Empty(t, table.pool.more, "parts whose hash another part took")
	assert.Same(t, objs[0].At, objs[100].At, "equal times are shared")
	assert.Same(t, objs[0].Micro, objs[100].Micro)
	assert.NotSame(t, objs[0].At, objs[1].At)
}

// An initial list only adds: the table never rebuilds while it fills.
// Once its owner drops every object, the table holds nothing.
func TestReleaseWhenEveryObjectIsDropped(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	table := New(store)
	var pods []*corev1.Pod
	for d := range 10 {
		pods = append(pods, podsOf(t, workload.Deployment("shop", d, 20), 20)...)
	}
	for _, p := range pods {
		table.Take(p)
		require.NoError(t, store.Add(p))
		table.Held(p)
	}
	assert.Zero(t, table.pool.generation, "adds alone do not rebuild")
	require.Positive(t, table.Len())

	for i, p := range pods {
		require.NoError(t, store.Delete(p))
		table.Dropped(p)
		if i == len(pods)/2 {
			assert.Positive(t, table.pool.generation, "deleting half rebuilds")
		}
	}
	assert.Zero(t, table.Len(), "no object held, no part held")
	assert.Zero(t, table.Bytes(0))
	assert.Empty(t, table.pool.taken)
}

type (
	labelKey   string
	labelValue string
)

// mapped holds a map of each kind a table walks its own way.
type mapped struct {
	metav1.ObjectMeta
	Named     map[labelKey]labelValue
	Resources corev1.ResourceList
	Lists     map[string][]string
	Pointers  map[string]*corev1.ObjectReference
	Numbered  map[int32]string
	// NaN is a key never found again: such maps are never shared.
	Floats map[float64]string
	Any    map[string]any
}

// newMapped returns a mapped whose strings are copies of their own.
func newMapped(name string) *mapped {
	c := strings.Clone
	return &mapped{
		ObjectMeta: metav1.ObjectMeta{Name: c("obj"), Namespace: c("shop")},
		Named:      map[labelKey]labelValue{labelKey(c("app")): labelValue(c(name))},
		Resources:  corev1.ResourceList{corev1.ResourceName(c("cpu")): resource.MustParse("250m"), corev1.ResourceName(c("memory")): resource.MustParse("512Mi")},
		Lists:      map[string][]string{c("args"): {c("--v=2"), c("--log=json")}},
		Pointers:   map[string]*corev1.ObjectReference{c("owner"): {Kind: c("ReplicaSet"), Name: c(name)}},
		Numbered:   map[int32]string{80: c("http")},
		Floats:     map[float64]string{math.NaN(): c("nan"), 1.5: c(name)},
		Any: map[string]any{c("spec"): map[string]any{
			c("tags"): []any{c("a"), 1.5},
			c("ref"):  &corev1.ObjectReference{Name: c("x")},
		}},
	}
}

// equalMapped compares as require.Equal would, NaN keys aside.
func equalMapped(t *testing.T, want, got *mapped) {
	t.Helper()
	require.Len(t, got.Floats, len(want.Floats))
	require.Equal(t, want.Floats[1.5], got.Floats[1.5])
	w, g := *want, *got
	w.Floats, g.Floats = nil, nil
	requireEqual(t, &w, &g)
}

func keyData[K ~string, V any](m map[K]V) *byte {
	for k := range m {
		return unsafe.StringData(string(k))
	}
	return nil
}

// Maps of every kind are shared when equal; a map that differs is kept,
// its keys and values made canonical.
func TestTakeSharesMaps(t *testing.T) {
	for _, update := range []bool{false, true} {
		t.Run(fmt.Sprintf("update=%t", update), func(t *testing.T) {
			a, b, c := newMapped("web"), newMapped("web"), newMapped("api")
			want := []*mapped{newMapped("web"), newMapped("web"), newMapped("api")}
			store := cache.NewStore(cache.MetaNamespaceKeyFunc)
			table := New(store)
			table.Take(a)
			if update {
				// b and c replace a: they are compared with it first.
				require.NoError(t, store.Add(a))
			}
			table.Take(b)
			table.Take(c)
			for i, m := range []*mapped{a, b, c} {
				equalMapped(t, want[i], m)
			}

			assert.True(t, sameMap(a.Named, b.Named), "named string types")
			assert.True(t, sameMap(a.Resources, b.Resources), "quantities")
			assert.True(t, sameMap(a.Lists, b.Lists), "slices")
			assert.True(t, sameMap(a.Pointers, b.Pointers), "pointers")
			assert.True(t, sameMap(a.Numbered, b.Numbered), "numbers")
			assert.True(t, sameMap(a.Any, b.Any), "interfaces")
			assert.False(t, sameMap(a.Floats, b.Floats), "a NaN key")
			assert.Same(t, unsafe.StringData(a.Floats[1.5]), unsafe.StringData(b.Floats[1.5]), "a NaN key's map holds canonical values")

			// c differs in Named and Pointers: its maps are its own, with
			// canonical keys and values.
			assert.False(t, sameMap(a.Named, c.Named))
			assert.Same(t, keyData(a.Named), keyData(c.Named), "canonical keys")
			assert.False(t, sameMap(a.Pointers, c.Pointers))
			assert.Same(t, keyData(a.Pointers), keyData(c.Pointers))
			assert.Same(t, unsafe.StringData(a.Pointers["owner"].Kind), unsafe.StringData(c.Pointers["owner"].Kind), "values made canonical")
			assert.True(t, sameMap(a.Lists, c.Lists), "what is equal still is")
			assert.True(t, sameMap(a.Resources, c.Resources))

			// What differs inside an interface is apart; what is equal there
			// is shared.
			d := newMapped("web")
			d.Any["spec"].(map[string]any)["extra"] = strings.Clone("yes")
			table.Take(d)
			specs := []map[string]any{a.Any["spec"].(map[string]any), d.Any["spec"].(map[string]any)}
			assert.False(t, sameMap(specs[0], specs[1]))
			assert.Same(t, unsafe.SliceData(specs[0]["tags"].([]any)), unsafe.SliceData(specs[1]["tags"].([]any)), "a slice in an interface")
			assert.Same(t, specs[0]["ref"], specs[1]["ref"], "a pointer in an interface")
		})
	}
}

// A table never writes what it holds, nor what it only reads: a map read
// keeps its entries, even where the table holds other copies of them.
func TestTakeWritesOnlyWhatItOwns(t *testing.T) {
	table := New(cache.NewStore(cache.MetaNamespaceKeyFunc))
	a := newMapped("web")
	table.Take(a)
	before := snapshot(a)

	// Another object whose maps differ from a's, but hold its strings.
	b := newMapped("web")
	b.Named["tier"] = "front"
	b.Lists["args"] = append(b.Lists["args"], "--extra")
	table.Take(b)
	assert.Equal(t, before, snapshot(a), "a, held, is unchanged")

	// Read, as a rebuild reads what its owner holds.
	c := newMapped("web")
	before = snapshot(c)
	table.pool.register(c)
	assert.Equal(t, before, snapshot(c), "c, read, is unchanged")
	equalMapped(t, newMapped("web"), c)
}

// snapshot records where a mapped's maps, keys and values are.
func snapshot(m *mapped) []uintptr {
	var at []uintptr
	add := func(p unsafe.Pointer) { at = append(at, uintptr(p)) }
	for _, mp := range []any{m.Named, m.Resources, m.Lists, m.Pointers, m.Numbered, m.Floats, m.Any} {
		add(reflect.ValueOf(mp).UnsafePointer())
	}
	for k, v := range m.Named {
		add(unsafe.Pointer(unsafe.StringData(string(k))))
		add(unsafe.Pointer(unsafe.StringData(string(v))))
	}
	for k, v := range m.Lists {
		add(unsafe.Pointer(unsafe.StringData(k)))
		add(unsafe.Pointer(unsafe.SliceData(v)))
	}
	for k, v := range m.Pointers {
		add(unsafe.Pointer(unsafe.StringData(k)))
		add(unsafe.Pointer(v))
	}
	add(unsafe.Pointer(unsafe.StringData(m.Floats[1.5])))
	for k, v := range m.Floats {
		if math.IsNaN(k) {
			add(unsafe.Pointer(unsafe.StringData(v)))
		}
	}
	spec := m.Any["spec"].(map[string]any)
	add(reflect.ValueOf(spec).UnsafePointer())
	add(unsafe.Pointer(unsafe.SliceData(spec["tags"].([]any))))
	add(unsafe.Pointer(spec["ref"].(*corev1.ObjectReference)))
	return at
}

// Names, UIDs and resource versions are never held: no other object of a
// store holds them. Parts that hold metadata are still compared exactly,
// by content.
func TestUniqueMetadataIsNotHeld(t *testing.T) {
	table := New(cache.NewStore(cache.MetaNamespaceKeyFunc))
	cm := func(i int) *corev1.ConfigMap {
		c := &corev1.ConfigMap{Data: map[string]string{"k": "v"}}
		c.Name, c.Namespace = fmt.Sprint("cm-", i), "shop"
		c.UID, c.ResourceVersion = types.UID(fmt.Sprint("uid-", i)), fmt.Sprint(1000+i)
		raw, err := c.Marshal()
		require.NoError(t, err)
		out := &corev1.ConfigMap{}
		require.NoError(t, out.Unmarshal(raw))
		return out
	}
	table.Take(cm(0))
	parts := table.Len()
	for i := 1; i < 100; i++ {
		table.Take(cm(i))
	}
	assert.Equal(t, parts, table.Len(), "ConfigMaps that differ only in name, UID and version add nothing")
	assert.Positive(t, table.Bytes(0), "their strings are counted")

	type templates struct {
		metav1.ObjectMeta
		Templates []corev1.PodTemplateSpec
	}
	template := func(name string) []corev1.PodTemplateSpec {
		return []corev1.PodTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: strings.Clone(name), Labels: map[string]string{"app": "web"}}}}
	}
	a := &templates{Templates: template("web")}
	b := &templates{Templates: template("web")}
	c := &templates{Templates: template("db")}
	for _, o := range []*templates{a, b, c} {
		table.Take(o)
	}
	assert.Same(t, unsafe.SliceData(a.Templates), unsafe.SliceData(b.Templates), "equal templates are shared")
	assert.NotSame(t, unsafe.SliceData(a.Templates), unsafe.SliceData(c.Templates), "templates that differ in name are not")
	assert.Equal(t, "db", c.Templates[0].Name)
	assert.True(t, sameMap(a.Templates[0].Labels, c.Templates[0].Labels), "their labels are")
}

// The tables of one pool, each a store's (as the stores of one kind in
// several clusters), share what their objects repeat: the same Pods in
// two stores hold one copy of their parts. Each table's Bytes counts its
// share of the parts. A table closed gives back the parts only its
// objects held.
func TestPoolSharesAcrossTables(t *testing.T) {
	pool := NewPool()
	stores := [2]cache.Store{cache.NewStore(cache.MetaNamespaceKeyFunc), cache.NewStore(cache.MetaNamespaceKeyFunc)}
	tables := [2]*Table{pool.Table(stores[0]), pool.Table(stores[1])}
	var pods [2][]*corev1.Pod
	for i := range 2 {
		pods[i] = podsOf(t, workload.Deployment("shop", 1, 4), 4)
		for _, p := range pods[i] {
			tables[i].Take(p)
			require.NoError(t, stores[i].Add(p))
			tables[i].Held(p)
		}
	}
	a, b := pods[0][2], pods[1][2]
	assert.NotSame(t, a, b)
	assert.Same(t, unsafe.SliceData(a.Spec.Containers), unsafe.SliceData(b.Spec.Containers), "one copy of what both stores' Pods repeat")
	whole := tables[0].PartsBytes()
	alone := New(cache.NewStore(cache.MetaNamespaceKeyFunc))
	for _, p := range podsOf(t, workload.Deployment("shop", 1, 4), 4) {
		alone.Take(p)
	}
	// Within 2%: only the strings each object alone holds count twice.
	assert.InDelta(t, alone.PartsBytes(), whole, float64(alone.PartsBytes())/50, "two stores of the same Pods hold the parts of one")
	shares := tables[0].Bytes(4) + tables[1].Bytes(4) - 8*pool.rootSize
	assert.InDelta(t, whole, shares, float64(whole)/100, "the tables share the parts out")

	// An own Deployment's Pods in the second store only.
	own := podsOf(t, workload.Deployment("own", 2, 2), 2)
	for _, p := range own {
		tables[1].Take(p)
		require.NoError(t, stores[1].Add(p))
		tables[1].Held(p)
	}
	withOwn := tables[0].PartsBytes()
	require.Greater(t, withOwn, whole)
	before := b.DeepCopy()
	tables[1].Close()
	assert.Less(t, tables[0].PartsBytes(), withOwn, "closed, its own parts go")
	assert.InDelta(t, whole, tables[0].PartsBytes(), float64(whole)/10, "what the first store holds stays")
	assert.Equal(t, tables[0].Bytes(4)-4*pool.rootSize, tables[0].PartsBytes(), "one table left counts every part")
	requireEqual(t, before, b, "objects of the closed table are left as they were")

	// An informer still stopping hands the closed table objects: they
	// count nowhere.
	late := podsOf(t, workload.Deployment("late", 3, 2), 2)
	closed := tables[0].PartsBytes()
	tables[1].Take(late[0])
	tables[1].Dropped(pods[1][0])
	assert.Equal(t, closed, tables[0].PartsBytes(), "a closed table takes nothing")
	assert.Equal(t, tables[0].Bytes(4)-4*pool.rootSize, tables[0].PartsBytes(), "nor drops")
	assert.Empty(t, pool.taken)
}
