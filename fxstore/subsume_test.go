package fxstore_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fxkube/fxkube/fxstore"
)

var configMaps = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

func key(namespace, labelSel, fieldSel string) fxstore.Key {
	return fxstore.Key{Kind: configMaps, Namespace: namespace, LabelSelector: labelSel, FieldSelector: fieldSel, Transform: fxstore.StripManagedFields.Name}
}

func metadataKey(namespace, labelSel, transform string) fxstore.Key {
	return fxstore.Key{Kind: configMaps, Namespace: namespace, LabelSelector: labelSel, Projection: fxstore.Metadata, Transform: transform}
}

func withTransform(k fxstore.Key, transform string) fxstore.Key {
	k.Transform = transform
	return k
}

func TestCovers(t *testing.T) {
	tests := []struct {
		name          string
		broad, narrow fxstore.Key
		want          bool
	}{
		{"all covers a namespace", key("", "", ""), key("a", "", ""), true},
		{"a namespace does not cover all", key("a", "", ""), key("", "", ""), false},
		{"a namespace does not cover another", key("a", "", ""), key("b", "", ""), false},
		{"everything covers a selector", key("", "", ""), key("", "tier=front", ""), true},
		{"a=1 implies a in (1,2)", key("", "a in (1,2)", ""), key("", "a=1", ""), true},
		{"a=1 implies a", key("", "a", ""), key("", "a=1", ""), true},
		{"a=1 implies a!=2", key("", "a!=2", ""), key("", "a=1", ""), true},
		{"a=1 implies !b only with !b", key("", "!b", ""), key("", "a=1", ""), false},
		{"a in (1,2) does not imply a=1", key("", "a=1", ""), key("", "a in (1,2)", ""), false},
		{"a does not imply a=1", key("", "a=1", ""), key("", "a", ""), false},
		{"more terms imply fewer", key("", "a=1", ""), key("", "a=1,b=2", ""), true},
		{"a>5 implies a>3", key("", "a>3", ""), key("", "a>5", ""), true},
		{"a>3 does not imply a>5", key("", "a>5", ""), key("", "a>3", ""), false},
		{"a in (4,5) implies a>3", key("", "a>3", ""), key("", "a in (4,5)", ""), true},
		{"a notin (1) does not imply a notin (1,2)", key("", "a notin (1,2)", ""), key("", "a notin (1)", ""), false},
		{"!a implies a notin (1)", key("", "a notin (1)", ""), key("", "!a", ""), true},
		{"same fields", key("", "", "spec.x=1"), key("", "a=1", "spec.x=1"), true},
		{"a name within all", key("", "", ""), key("", "", "metadata.name=x"), true},
		{"broad fields plus a name", key("", "", "spec.x=1"), key("", "", "metadata.name=y,spec.x=1"), true},
		{"another field", key("", "", ""), key("", "", "spec.x=1"), false},
		{"other kinds", key("", "", ""), fxstore.Key{Kind: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Transform: fxstore.StripManagedFields.Name}, false},
		{"typed covers metadata-only", key("", "", ""), metadataKey("a", "tier=front", fxstore.StripManagedFields.Name), true},
		{"typed covers metadata-only, keeping everything", withTransform(key("", "", ""), "none"), metadataKey("", "", "none"), true},
		{"not with a transform of one's own", withTransform(key("", "", ""), "mine"), metadataKey("", "", "mine"), false},
		{"metadata-only does not cover typed", metadataKey("", "", fxstore.StripManagedFields.Name), key("", "", ""), false},
		{"unstructured does not cover metadata-only", fxstore.Key{Kind: configMaps, Projection: fxstore.Unstructured, Transform: fxstore.StripManagedFields.Name}, metadataKey("", "", fxstore.StripManagedFields.Name), false},
		{"other transforms", key("", "", ""), fxstore.Key{Kind: configMaps, Transform: "none"}, false},
		{"labels that do not parse cover nothing", key("", "a=(", ""), key("", "a=1", ""), false},
		{"nor are covered", key("", "", ""), key("", "a=(", ""), false},
		{"nor fields", key("", "", ""), key("", "", "metadata.name"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fxstore.Covers(tt.broad, tt.narrow))
		})
	}
}

func TestKeyMatcher(t *testing.T) {
	match, err := fxstore.KeyMatcher(key("a", "tier=front", "metadata.name!=skip"))
	require.NoError(t, err)
	obj := func(ns, name string, labels map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	front := map[string]string{"tier": "front"}
	assert.True(t, match(obj("a", "x", front)))
	assert.False(t, match(obj("b", "x", front)), "another namespace")
	assert.False(t, match(obj("a", "skip", front)), "the excluded name")
	assert.False(t, match(obj("a", "x", map[string]string{"tier": "back"})), "other labels")
	o := obj("a", "x", front)
	assert.Zero(t, testing.AllocsPerRun(100, func() { match(o) }), "matching allocates nothing")

	_, err = fxstore.KeyMatcher(key("", "", "spec.x=1"))
	assert.ErrorContains(t, err, `field "spec.x" cannot be selected on the client`)
}

// FuzzLabelsImply checks that Covers never claims a narrow selector implies
// a broad one that some label set matching narrow does not match, over
// label sets built from the selectors' own keys and values and others.
func FuzzLabelsImply(f *testing.F) {
	for _, seed := range [][2]string{
		{"a=1", "a in (1,2)"}, {"a=1", "a"}, {"a=1", "a!=2"}, {"a in (1,2)", "a=1"}, {"a", "a=1"},
		{"a=1,b=2", "a=1"}, {"a>5", "a>3"}, {"a in (4,5)", "a>3"}, {"a notin (1)", "a notin (1,2)"},
		{"!a", "a notin (1)"}, {"a>1,a<3", "a=2"}, {"a>1,a<2", "b=1"}, {"a=1,a=2", "b"}, {"a", "!b"},
		{"a notin (1,2),a", "a"}, {"a in (x,1)", "a>0"}, {"a<0", "a<1"}, {"", "a"}, {"a", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, narrow, broad string) {
		n, err := labels.Parse(narrow)
		if err != nil {
			return
		}
		b, err := labels.Parse(broad)
		if err != nil {
			return
		}
		if !fxstore.Covers(key("", broad, ""), key("", narrow, "")) {
			return
		}
		rnd := rand.New(rand.NewPCG(uint64(len(narrow)), uint64(len(broad))))
		for _, set := range universe(rnd, n, b) {
			if n.Matches(set) && !b.Matches(set) {
				t.Fatalf("%q is said to imply %q, but %v matches only the first", narrow, broad, set)
			}
		}
	})
}

// FuzzKeyMatcherLabels checks that KeyMatcher evaluates a label selector
// as labels.Selector.Matches does, on every label set over its keys and
// values (plus others).
func FuzzKeyMatcherLabels(f *testing.F) {
	for _, seed := range []string{
		"a=1", "a==1", "a!=1", "a in (1)", "a in (1,2)", "a notin (1)", "a notin (1,2)", "a", "!a",
		"a>1", "a<1", "a=1,b!=2,!c", "a in (x,1),b", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, selector string) {
		sel, err := labels.Parse(selector)
		if err != nil {
			return
		}
		match, err := fxstore.KeyMatcher(key("", selector, ""))
		require.NoError(t, err)
		rnd := rand.New(rand.NewPCG(uint64(len(selector)), 1))
		for _, set := range universe(rnd, sel) {
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: set}}
			if got, want := match(obj), sel.Matches(set); got != want {
				t.Fatalf("%q on %v: KeyMatcher says %v, labels %v", selector, set, got, want)
			}
		}
	})
}

// universe returns label sets over the keys and values of the selectors
// plus others: every combination when few, else a sample.
func universe(rnd *rand.Rand, sels ...labels.Selector) []labels.Set {
	keys := []string{"z"}
	values := []string{"0", "1", "2", "10", "-1", "x", "y"}
	for _, s := range sels {
		reqs, _ := s.Requirements()
		for _, r := range reqs {
			if !slices.Contains(keys, r.Key()) {
				keys = append(keys, r.Key())
			}
			for _, v := range r.ValuesUnsorted() {
				if !slices.Contains(values, v) {
					values = append(values, v)
				}
			}
		}
	}
	choices := len(values) + 1 // a value, or absent
	total := 1
	for range keys {
		total *= choices
		if total > 4096 {
			break
		}
	}
	var sets []labels.Set
	if total <= 4096 {
		for i := range total {
			set := labels.Set{}
			for _, k := range keys {
				if c := i % choices; c < len(values) {
					set[k] = values[c]
				}
				i /= choices
			}
			sets = append(sets, set)
		}
		return sets
	}
	for range 4096 {
		set := labels.Set{}
		for _, k := range keys {
			if c := rnd.IntN(choices); c < len(values) {
				set[k] = values[c]
			}
		}
		sets = append(sets, set)
	}
	return sets
}
