package fxstore_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/internal/workload"
)

// A store held as bytes reads, indexes and sends events as any other,
// each read a copy of its own; it is no view's parent.
func TestHeldAsBytes(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	typed, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.HeldAsBytes(), fxstore.WithIndex("app", byApp))
	require.NoError(t, err)
	// Unstructured objects are held as JSON.
	dynamic, err := fxstore.For[*unstructured.Unstructured](r, fxstore.Spec{Kind: configMapKind}, fxstore.HeldAsBytes())
	require.NoError(t, err)
	narrow, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{Namespace: "a"})
	require.NoError(t, err)

	var (
		mu     sync.Mutex
		events []string
	)
	_, err = typed.Subscribe(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, "add "+obj.(*corev1.ConfigMap).Data["k"])
		},
		UpdateFunc: func(_, obj any) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, "update "+obj.(*corev1.ConfigMap).Data["k"])
		},
		DeleteFunc: func(obj any) {
			mu.Lock()
			defer mu.Unlock()
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			events = append(events, "delete "+obj.(*corev1.ConfigMap).Name)
		},
	})
	require.NoError(t, err)
	src := fxstoretest.NewSource(clientgoscheme.Scheme,
		testenv.ConfigMap("a", "web", testenv.Labels{"app": "web"}, testenv.Data{"k": "1"}),
		testenv.ConfigMap("b", "db", testenv.Labels{"app": "db"}, testenv.Data{"k": "2"}),
	)
	fxstoretest.Start(t, r, src)

	n, views := informers(r)
	assert.Equal(t, 3, n, "no store is a view of one held as bytes: %v", views)

	a1, err := typed.Get("a", "web")
	require.NoError(t, err)
	a2, err := typed.Get("a", "web")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"k": "1"}, a1.Data)
	assert.Equal(t, map[string]string{"app": "web"}, a1.Labels)
	assert.NotSame(t, a1, a2, "each read decodes a copy")
	byApp, err := typed.ByIndex("app", "db")
	require.NoError(t, err)
	require.Len(t, byApp, 1)
	assert.Equal(t, "db", byApp[0].Name)
	inA, err := typed.List(client.InNamespace("a"))
	require.NoError(t, err)
	assert.Len(t, inA, 1)
	count, err := typed.Count()
	require.NoError(t, err)
	assert.Equal(t, 2, count)

	u, err := dynamic.Get("b", "db")
	require.NoError(t, err)
	assert.Equal(t, "ConfigMap", u.GetKind(), "the kind is kept")
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	assert.Equal(t, map[string]string{"k": "2"}, data)

	for _, s := range r.Stores() {
		if s.Key == typed.Key() {
			assert.Positive(t, s.Bytes, "the encodings are counted")
		}
	}

	// Events carry decoded objects.
	a1 = a1.DeepCopy()
	a1.Data["k"] = "3"
	require.NoError(t, src.Client().Update(t.Context(), a1))
	require.NoError(t, src.Client().Delete(t.Context(), testenv.ConfigMap("b", "db")))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(events) == 4
	}, 10*time.Second, 10*time.Millisecond)
	assert.ElementsMatch(t, []string{"add 1", "add 2", "update 3", "delete db"}, events)
	got, err := narrow.Get("a", "web")
	require.NoError(t, err)
	assert.Equal(t, "3", got.Data["k"])
}

// Built-in kinds are held as protobuf, others as JSON.
func TestHeldAsBytesEncodings(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
	}
	raw, err := fxstore.HeldEncoding(pod)
	require.NoError(t, err)
	assert.False(t, json.Valid(raw), "a Pod is held as protobuf")
	back := &corev1.Pod{}
	require.NoError(t, back.Unmarshal(raw))
	assert.Equal(t, pod, back)

	for _, obj := range []k8sruntime.Object{
		&widget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "w"}, Mode: "quiet"},
		// It has a Pod's protobuf methods, which would encode the Pod alone.
		&podWithExtra{Pod: *pod, Extra: "kept"},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c"}}},
	} {
		raw, err := fxstore.HeldEncoding(obj)
		require.NoError(t, err)
		assert.True(t, json.Valid(raw), "%T is held as JSON", obj)
	}
}

// An object held as JSON is checked to decode back to itself only if its
// type may not: Kubernetes' own types decode what they encode.
func TestJSONMayChange(t *testing.T) {
	type (
		spec struct {
			Created  metav1.Time                 `json:"created"`
			Selector *metav1.LabelSelector       `json:"selector"`
			Extra    []unstructured.Unstructured `json:"extra"`
			Raw      k8sruntime.RawExtension     `json:"raw"`
		}
		ownKind struct {
			metav1.ObjectMeta `json:"metadata"`
			Spec              spec `json:"spec"`
		}
		hidden struct {
			Spec   spec   `json:"spec"`
			cached string //nolint:unused // a field JSON leaves out
		}
		nested struct {
			Items []*widget `json:"items"`
		}
		loose struct {
			Values map[string]any `json:"values"`
		}
		embedded struct {
			metav1.TypeMeta `json:",inline"`
			spec            // an unexported struct: JSON takes its fields
		}
		count     int //nolint:unused // embedded below
		embedsInt struct {
			spec
			count //nolint:unused // an unexported integer: JSON leaves it out
		}
	)
	tests := []struct {
		give reflect.Type
		want bool
	}{
		{reflect.TypeFor[corev1.Pod](), false},
		{reflect.TypeFor[unstructured.Unstructured](), false},
		{reflect.TypeFor[ownKind](), false},
		{reflect.TypeFor[widget](), true}, // a field left out, and UnmarshalJSON of its own
		{reflect.TypeFor[lowercase](), true},
		{reflect.TypeFor[hidden](), true},
		{reflect.TypeFor[nested](), true},
		{reflect.TypeFor[loose](), true}, // JSON gives back other types than a transform may set
		{reflect.TypeFor[embedded](), false},
		{reflect.TypeFor[embedsInt](), true},
	}
	for _, tt := range tests {
		t.Run(tt.give.String(), func(t *testing.T) {
			assert.Equal(t, tt.want, fxstore.JSONMayChange(tt.give))
		})
	}
}

// HeldAsBytes is asked before a store starts: a store holding objects
// cannot turn to bytes.
func TestHeldAsBytesAfterStart(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	_, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{})
	require.NoError(t, err)
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme))
	_, err = fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.HeldAsBytes())
	require.ErrorContains(t, err, "fxstore.HeldAsBytes(): the store has started, holding its objects decoded; give the option in a constructor, before the app starts")
}

// A List by label from a store held as bytes selects on labels it keeps
// beside the encoding, and decodes only the objects selected: it returns
// what a store of decoded objects returns.
func TestHeldAsBytesListsBySelector(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	asBytes, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{}, fxstore.HeldAsBytes())
	require.NoError(t, err)
	decoded, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: "group"})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	var objs []client.Object
	for i := range 90 {
		l := map[string]string{"group": fmt.Sprint(i % 3)}
		for _, k := range []string{"app", "tier", "example.com/team"} {
			if rng.IntN(3) > 0 {
				l[k] = fmt.Sprint(rng.IntN(3))
			}
		}
		objs = append(objs, testenv.ConfigMap(fmt.Sprint("ns-", i%3), fmt.Sprint("cm-", i), testenv.Labels(l), testenv.Data{"k": fmt.Sprint(i)}))
	}
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme, objs...))

	names := func(objs []*corev1.ConfigMap) []string {
		out := make([]string, len(objs))
		for i, o := range objs {
			out[i] = o.Namespace + "/" + o.Name + "=" + o.Data["k"]
		}
		slices.Sort(out)
		return out
	}
	for _, selector := range []string{"app=1", "app!=1", "tier in (0,2)", "tier notin (0)", "example.com/team", "!example.com/team", "app=0,tier=1", "app,!tier,group=2"} {
		sel, err := labels.Parse(selector)
		require.NoError(t, err)
		for _, ns := range []string{"", "ns-1"} {
			want, err := decoded.List(client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel})
			require.NoError(t, err)
			got, err := asBytes.List(client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel})
			require.NoError(t, err)
			assert.Equal(t, names(want), names(got), "%q in %q", selector, ns)
		}
	}

	// A few objects of 90 selected: a few decodes' allocations, not 90.
	one := client.MatchingLabels(objs[0].GetLabels())
	selected, err := asBytes.List(one)
	require.NoError(t, err)
	require.NotEmpty(t, selected)
	all := testing.AllocsPerRun(10, func() { _, _ = asBytes.List() })
	few := testing.AllocsPerRun(10, func() { _, _ = asBytes.List(one) })
	t.Logf("allocations: %.0f to list all 90, %.0f to list the %d selected", all, few, len(selected))
	assert.Less(t, few, all/10)
}

// A store held as bytes keeps decoded an object its encoding would change:
// reads return what the transform made, where they would have lost a
// field or failed to decode. One warning names the store and the fix.
func TestHeldAsBytesKeepsDecodedWhatJSONWouldChange(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	scheme.AddKnownTypes(widgetVersion, &widget{}, &widgetList{})
	metav1.AddToGroupVersion(scheme, widgetVersion)
	core, logs := observer.New(zapcore.WarnLevel)
	r := fxstore.NewRegistry(scheme, fxstore.WithLogger(zap.New(core)))
	transform := fxstore.Transform{Name: "annotate", Func: func(obj any) (any, error) {
		w := obj.(*widget)
		switch w.Name {
		case "loud":
			w.Mode = "LOUD" // valid to marshal, refused by UnmarshalJSON
		case "noted":
			w.Note = "set by the transform" // left out of JSON
		}
		return w, nil
	}}
	store, err := fxstore.For[*widget](r, fxstore.Spec{Transform: transform}, fxstore.HeldAsBytes())
	require.NoError(t, err)
	fxstoretest.Start(t, r, fxstoretest.NewSource(scheme,
		&widget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "loud"}, Mode: "quiet"},
		&widget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "noted"}, Mode: "quiet"},
		&widget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "plain"}, Mode: "quiet"},
	))

	loud, err := store.Get("a", "loud")
	require.NoError(t, err)
	assert.Equal(t, lowercase("LOUD"), loud.Mode)
	again, err := store.Get("a", "loud")
	require.NoError(t, err)
	assert.NotSame(t, loud, again, "an object kept decoded is read as a copy, as any other")
	noted, err := store.Get("a", "noted")
	require.NoError(t, err)
	assert.Equal(t, "set by the transform", noted.Note)
	plain, err := store.Get("a", "plain")
	require.NoError(t, err)
	again, err = store.Get("a", "plain")
	require.NoError(t, err)
	assert.NotSame(t, plain, again, "an object that survives its JSON is held as bytes")
	all, err := store.List()
	require.NoError(t, err)
	assert.Len(t, all, 3)

	warnings := logs.FilterMessageSnippet("keeps objects decoded").All()
	require.Len(t, warnings, 1, "one warning for the store")
	fields := warnings[0].ContextMap()
	assert.Equal(t, store.Key().String(), fields["store"])
	assert.Contains(t, fields["error"], "a/")
	assert.Contains(t, fields["fix"], "fxstore.HeldAsBytes()")
}

var widgetVersion = schema.GroupVersion{Group: "example.com", Version: "v1"}

// widget is a custom kind whose JSON a transform can make change it.
type widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Mode              lowercase `json:"mode"`
	Note              string    `json:"-"`
}

// lowercase is a string that refuses upper case as it decodes.
type lowercase string

func (l *lowercase) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s != strings.ToLower(s) {
		return fmt.Errorf("%q is not lower case", s)
	}
	*l = lowercase(s)
	return nil
}

func (w *widget) DeepCopyObject() k8sruntime.Object {
	out := *w
	w.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

type widgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []widget `json:"items"`
}

func (l *widgetList) DeepCopyObject() k8sruntime.Object {
	out := *l
	out.Items = make([]widget, len(l.Items))
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*widget)
	}
	return &out
}

// A store held as bytes holds once the fields its objects' protobuf
// encodings repeat: the replicas of a Deployment share their containers.
func TestHeldAsBytesSharesWhatEncodingsRepeat(t *testing.T) {
	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	store, err := fxstore.For[*corev1.Pod](r, fxstore.Spec{}, fxstore.HeldAsBytes())
	require.NoError(t, err)
	var pods []client.Object
	for d := range 4 {
		deployment := workload.Deployment("shop", d, 20)
		for i := range 20 {
			pods = append(pods, workload.Pod(deployment, i))
		}
	}
	fxstoretest.Start(t, r, fxstoretest.NewSource(clientgoscheme.Scheme, pods...))

	all, err := store.List()
	require.NoError(t, err)
	require.Len(t, all, len(pods))
	byName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		byName[p.GetName()] = p.(*corev1.Pod)
	}
	encoded := 0
	for _, pod := range all {
		want := byName[pod.Name]
		require.NotNil(t, want, pod.Name)
		assert.True(t, equality.Semantic.DeepEqual(want.Spec, pod.Spec), pod.Name)
		assert.True(t, equality.Semantic.DeepEqual(want.Status, pod.Status), pod.Name)
		assert.Equal(t, want.Labels, pod.Labels)
		raw, err := pod.Marshal()
		require.NoError(t, err)
		encoded += len(raw)
	}
	info := testenv.StoreInfo(t, r, store.Key())
	t.Logf("%d Pods: %d B encoded, the store holds about %d B", len(all), encoded, info.Bytes)
	// Unshared, the encodings and what holds them would be about 1.15×;
	// shared, about 0.83×: each Pod's containers mount a token volume of
	// its own, so their fields are shared, not the containers whole.
	assert.Less(t, float64(info.Bytes), 0.9*float64(encoded))
}

// podWithExtra embeds a Pod, and so its protobuf methods.
type podWithExtra struct {
	corev1.Pod `json:",inline"`
	Extra      string `json:"extra"`
}

func (p *podWithExtra) DeepCopyObject() k8sruntime.Object {
	return &podWithExtra{Pod: *p.Pod.DeepCopy(), Extra: p.Extra}
}
