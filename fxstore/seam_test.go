package fxstore_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/fxstore/fxstoretest"
	"github.com/fxkube/fxkube/internal/testenv"
)

// The specs and indexes the property test below asks for: nested, so
// that most stores are views of broader ones, typed and metadata-only.
var (
	seamSpecs = []fxstore.Spec{
		{},
		{Namespace: "a"},
		{Namespace: "b"},
		{LabelSelector: "team=x"},
		{LabelSelector: "team in (x,y)"},
		{Namespace: "a", LabelSelector: "team=x"},
		{Namespace: "a", LabelSelector: "app=x"},
		{LabelSelector: "app!=z"},
	}
	// Two functions under one name: a store takes one of them.
	seamIndexes = []struct {
		name string
		fn   func(client.Object) []string
	}{
		{"label", func(o client.Object) []string { return []string{o.GetLabels()["team"]} }},
		{"label", func(o client.Object) []string { return []string{o.GetLabels()["app"]} }},
		{"app", func(o client.Object) []string { return []string{o.GetLabels()["app"]} }},
		{"both", func(o client.Object) []string { return []string{o.GetLabels()["team"], o.GetLabels()["app"]} }},
	}
	seamValues = []string{"x", "y", "z", ""}
)

// seamStore is a store the property test asked for: its spec, whether it
// is metadata-only, and the index of seamIndexes each of its index names
// took.
type seamStore struct {
	spec     fxstore.Spec
	metadata bool
	indexes  map[string]int
	reader   seamReader
}

// seamReader reads a store of either type.
type seamReader struct {
	key     fxstore.Key
	list    func(...client.ListOption) ([]client.Object, error)
	byIndex func(index, value string) ([]client.Object, error)
}

func (s seamStore) String() string {
	return fmt.Sprintf("%+v metadata=%t", s.spec, s.metadata)
}

// Random requests for nested specs, before and after start, with indexes
// and options, and random churn: every store's List and ByIndex answer
// what a store of the same spec with an informer of its own answers, and
// what its spec selects of the source's objects. A request that cannot
// be honoured fails and changes nothing.
func TestEveryRequestGoesThroughTheBacking(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { checkSeam(t, seed) })
	}
}

func checkSeam(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 32))
	src := fxstoretest.NewSource(clientgoscheme.Scheme)
	c := src.Client()
	objects := map[string]bool{}
	churn := func(n int) {
		for range n {
			ns, name := []string{"a", "b", "c"}[rng.IntN(3)], fmt.Sprintf("cm-%d", rng.IntN(12))
			cm := testenv.ConfigMap(ns, name, testenv.Labels{"team": seamValues[rng.IntN(3)], "app": seamValues[rng.IntN(3)]})
			key := ns + "/" + name
			switch {
			case !objects[key]:
				require.NoError(t, c.Create(t.Context(), cm))
				objects[key] = true
			case rng.IntN(4) == 0:
				require.NoError(t, c.Delete(t.Context(), cm))
				delete(objects, key)
			default:
				require.NoError(t, c.Update(t.Context(), cm))
			}
		}
	}
	churn(20)

	r := fxstore.NewRegistry(clientgoscheme.Scheme)
	stores := map[string]*seamStore{}
	ask := func(started bool) {
		s := &seamStore{spec: seamSpecs[rng.IntN(len(seamSpecs))], metadata: rng.IntN(4) == 0}
		if prev, ok := stores[s.String()]; ok {
			s = prev
		}
		var (
			opts  []fxstore.Option
			added = map[string]int{}
			clash bool
		)
		for range rng.IntN(3) {
			i := rng.IntN(len(seamIndexes))
			name := seamIndexes[i].name
			if j, ok := s.indexes[name]; ok && j != i {
				clash = true
			}
			if j, ok := added[name]; ok && j != i {
				clash = true
			}
			added[name] = i
			opts = append(opts, fxstore.WithIndex(name, seamIndexes[i].fn))
		}
		option := ""
		switch rng.IntN(8) {
		case 0:
			opts, option = append(opts, fxstore.WithOwnInformer()), "fxstore.WithOwnInformer()"
		case 1:
			opts, option = append(opts, fxstore.WithoutSharing()), "fxstore.WithoutSharing()"
		}
		var before *fxstore.StoreInfo
		if started && s.reader.key != (fxstore.Key{}) {
			before = findStore(r, s.reader.key)
		}
		rd, err := forSeam(r, s, opts...)
		switch {
		case clash:
			require.ErrorContains(t, err, "is already defined with another function", "%s", s)
			return
		case started && before != nil && option != "" && err != nil:
			// A started store may not honour the option: it says so.
			require.ErrorContains(t, err, option+": the store has started", "%s", s)
			require.Equal(t, before.Consumers, findStore(r, s.reader.key).Consumers, "a request refused is not counted")
			return
		}
		require.NoError(t, err, "%s", s)
		if s.indexes == nil {
			s.indexes = map[string]int{}
		}
		maps.Copy(s.indexes, added)
		s.reader = rd
		stores[s.String()] = s
		if started && option == "fxstore.WithOwnInformer()" {
			require.Nil(t, findStore(r, rd.key).ViewOf, "%s: a store that took WithOwnInformer has an informer of its own", s)
		}
	}
	for range 6 {
		ask(false)
	}
	fxstoretest.Start(t, r, src)
	for range 12 {
		ask(true)
		churn(5)
	}
	for _, s := range stores {
		require.NoError(t, r.WaitForStore(t.Context(), s.reader.key))
	}

	// A store of each spec with an informer of its own, with the same
	// indexes.
	ref := fxstore.NewRegistry(clientgoscheme.Scheme)
	refs := map[*seamStore]seamReader{}
	for _, s := range stores {
		opts := []fxstore.Option{fxstore.WithOwnInformer()}
		for name, i := range s.indexes {
			opts = append(opts, fxstore.WithIndex(name, seamIndexes[i].fn))
		}
		rd, err := forSeam(ref, s, opts...)
		require.NoError(t, err)
		refs[s] = rd
	}
	fxstoretest.Start(t, ref, src)
	for _, info := range ref.Stores() {
		require.Nil(t, info.ViewOf, "%s", info.Key)
	}

	for round := range 3 {
		if round > 0 {
			churn(15)
		}
		for _, s := range stores {
			want := answers(t, s, src)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				require.Equal(c, want, readAll(c, s, s.reader), "%s in the registry under test", s)
				require.Equal(c, want, readAll(c, s, refs[s]), "%s in the registry of informers of their own", s)
			}, 10*time.Second, 10*time.Millisecond)
		}
	}
}

// forSeam asks r for s's store, typed or metadata-only.
func forSeam(r *fxstore.Registry, s *seamStore, opts ...fxstore.Option) (seamReader, error) {
	if s.metadata {
		spec := s.spec
		spec.Kind = configMapKind
		st, err := fxstore.For[*metav1.PartialObjectMetadata](r, spec, opts...)
		return readerOf(st), err
	}
	st, err := fxstore.For[*corev1.ConfigMap](r, s.spec, opts...)
	return readerOf(st), err
}

// readerOf reads st, which may be nil.
func readerOf[T client.Object](st *fxstore.Store[T]) seamReader {
	if st == nil {
		return seamReader{}
	}
	return seamReader{
		key:     st.Key(),
		list:    func(o ...client.ListOption) ([]client.Object, error) { return objectsOf(st.List(o...)) },
		byIndex: func(n, v string) ([]client.Object, error) { return objectsOf(st.ByIndex(n, v)) },
	}
}

// findStore returns what r reports of the store with key, nil if none.
func findStore(r *fxstore.Registry, key fxstore.Key) *fxstore.StoreInfo {
	for _, info := range r.Stores() {
		if info.Key == key {
			return &info
		}
	}
	return nil
}

// seamAnswers is what a store answers: its List, its List in each
// namespace and by a label, and ByIndex for each of its indexes and
// values, each as sorted "namespace/name" keys.
type seamAnswers map[string][]string

// readAll reads s's store through rd.
func readAll(t require.TestingT, s *seamStore, rd seamReader) seamAnswers {
	out := seamAnswers{}
	read := func(what string, objs []client.Object, err error) {
		require.NoError(t, err, what)
		out[what] = sortedNames(objs)
	}
	objs, err := rd.list()
	read("List", objs, err)
	for _, ns := range []string{"a", "b", "c"} {
		objs, err := rd.list(client.InNamespace(ns))
		read("List in "+ns, objs, err)
	}
	objs, err = rd.list(client.MatchingLabels{"team": "y"})
	read("List team=y", objs, err)
	for _, name := range slices.Sorted(maps.Keys(s.indexes)) {
		for _, v := range seamValues {
			objs, err := rd.byIndex(name, v)
			read(fmt.Sprintf("ByIndex(%s, %q)", name, v), objs, err)
		}
	}
	return out
}

func objectsOf[T client.Object](objs []T, err error) ([]client.Object, error) {
	out := make([]client.Object, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out, err
}

// answers is what s's store should answer: what its spec selects of the
// source's objects.
func answers(t *testing.T, s *seamStore, src *fxstoretest.Source) seamAnswers {
	var all corev1.ConfigMapList
	require.NoError(t, src.Client().List(t.Context(), &all))
	sel, err := labels.Parse(s.spec.LabelSelector)
	require.NoError(t, err)
	var mine []client.Object
	for i := range all.Items {
		cm := &all.Items[i]
		if (s.spec.Namespace == "" || cm.Namespace == s.spec.Namespace) && sel.Matches(labels.Set(cm.Labels)) {
			mine = append(mine, cm)
		}
	}
	out := seamAnswers{"List": sortedNames(mine)}
	for _, ns := range []string{"a", "b", "c"} {
		out["List in "+ns] = sortedNames(slices.DeleteFunc(slices.Clone(mine), func(o client.Object) bool { return o.GetNamespace() != ns }))
	}
	out["List team=y"] = sortedNames(slices.DeleteFunc(slices.Clone(mine), func(o client.Object) bool { return o.GetLabels()["team"] != "y" }))
	for name, i := range s.indexes {
		for _, v := range seamValues {
			out[fmt.Sprintf("ByIndex(%s, %q)", name, v)] = sortedNames(slices.DeleteFunc(slices.Clone(mine), func(o client.Object) bool {
				return !slices.Contains(seamIndexes[i].fn(o), v)
			}))
		}
	}
	return out
}
