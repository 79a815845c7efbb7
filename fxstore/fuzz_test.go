package fxstore_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fxkube/fxkube/fxstore"
)

// FuzzCanonicalLabelSelector checks that canonical forms are fixed points,
// select what the original selects, and do not depend on the order terms
// are written in.
func FuzzCanonicalLabelSelector(f *testing.F) {
	for _, seed := range []string{
		"", "a=1", "a=1,b=2", " b=2, a=1", "a==1", "a in (1)", "a notin (x,y)", "!a,b",
		"env in (prod, dev),tier", "x!=1,x!=1", "a.b/c=d", "a=(", "a in ()", "a,,b", "a>1", "a<2",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		canon, err := fxstore.CanonicalLabelSelector(s)
		if err != nil {
			return
		}
		again, err := fxstore.CanonicalLabelSelector(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, s, err)
		}
		if again != canon {
			t.Fatalf("canonicalising %q twice: %q then %q", s, canon, again)
		}
		orig, _ := labels.Parse(s)
		sel, _ := labels.Parse(canon)
		reqs, _ := orig.Requirements()
		// Objects built from the selector's own values exercise it.
		for _, r := range reqs {
			for _, v := range append(r.Values().UnsortedList(), "") {
				set := labels.Set{r.Key(): v}
				if orig.Matches(set) != sel.Matches(set) {
					t.Fatalf("%q and its canonical form %q disagree on %v", s, canon, set)
				}
			}
		}
		// Reversing the order of the top-level terms keeps the key, when
		// the terms can be split safely (no set-based lists).
		if !strings.ContainsAny(s, "()") {
			terms := strings.Split(s, ",")
			for i, j := 0, len(terms)-1; i < j; i, j = i+1, j-1 {
				terms[i], terms[j] = terms[j], terms[i]
			}
			if rev, err := fxstore.CanonicalLabelSelector(strings.Join(terms, ",")); err == nil && rev != canon {
				t.Fatalf("%q and its reverse give %q and %q", s, canon, rev)
			}
		}
	})
}

// FuzzCanonicalFieldSelector checks that canonical field selectors are fixed
// points and independent of term order.
func FuzzCanonicalFieldSelector(f *testing.F) {
	for _, seed := range []string{"", "metadata.name=x", "a=1,b!=2", "b!=2, a==1", `a=x\,y`, "a", "a=1,a=1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		canon, err := fxstore.CanonicalFieldSelector(s)
		if err != nil {
			return
		}
		again, err := fxstore.CanonicalFieldSelector(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, s, err)
		}
		if again != canon {
			t.Fatalf("canonicalising %q twice: %q then %q", s, canon, again)
		}
	})
}
