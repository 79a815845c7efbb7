package fxstore_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/fxstore"
)

// FuzzEquivalentSpecsShareAStore rewrites each spec the registry takes into
// an equivalent one, written differently (terms reordered and repeated,
// operators spelled otherwise: "==", one-value "in" and "notin"; the values of
// a set reordered; blanks added), and checks that the registry gives both
// requests one store. Its seed corpus is in testdata/fuzz.
func FuzzEquivalentSpecsShareAStore(f *testing.F) {
	f.Fuzz(func(t *testing.T, labelSelector, fieldSelector string, seed uint64) {
		r := fxstore.NewRegistry(clientgoscheme.Scheme)
		a, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: labelSelector, FieldSelector: fieldSelector})
		if err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(seed, ^seed))
		ls, fs := rewriteLabelSelector(rng, labelSelector), rewriteFieldSelector(rng, fieldSelector)
		b, err := fxstore.For[*corev1.ConfigMap](r, fxstore.Spec{LabelSelector: ls, FieldSelector: fs})
		require.NoError(t, err, "labels %q and fields %q, rewritten as %q and %q", labelSelector, fieldSelector, ls, fs)
		require.Equal(t, a.Key(), b.Key(), "labels %q and fields %q, rewritten as %q and %q", labelSelector, fieldSelector, ls, fs)
		require.Same(t, a.Informer(), b.Informer())
		require.Len(t, r.Stores(), 1)
	})
}

// blank returns nothing, or some blanks.
func blank(rng *rand.Rand) string { return []string{"", " ", "  ", "\t"}[rng.IntN(4)] }

// rewriteLabelSelector writes the label selector s, which parses, in another
// equivalent way.
func rewriteLabelSelector(rng *rand.Rand, s string) string {
	sel, _ := labels.Parse(s)
	reqs, _ := sel.Requirements()
	var terms []string
	for _, r := range reqs {
		k, vals := r.Key(), r.Values().UnsortedList()
		rng.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
		set := func(op string) string {
			return k + " " + blank(rng) + op + blank(rng) + "(" + blank(rng) + strings.Join(vals, blank(rng)+","+blank(rng)) + blank(rng) + ")"
		}
		var term string
		switch op := r.Operator(); {
		case (op == selection.Equals || op == selection.DoubleEquals || op == selection.In) && len(vals) == 1:
			term = []string{k + blank(rng) + "=" + blank(rng) + vals[0], k + blank(rng) + "==" + blank(rng) + vals[0], set("in")}[rng.IntN(3)]
			if vals[0] == "" && strings.HasSuffix(term, ")") {
				term = k + "=" // "k in ()" does not parse
			}
		case (op == selection.NotEquals || op == selection.NotIn) && len(vals) == 1:
			term = []string{k + blank(rng) + "!=" + blank(rng) + vals[0], set("notin")}[rng.IntN(2)]
			if vals[0] == "" && strings.HasSuffix(term, ")") {
				term = k + "!="
			}
		case op == selection.In:
			term = set("in")
		case op == selection.NotIn:
			term = set("notin")
		case op == selection.Exists:
			term = k
		case op == selection.DoesNotExist:
			term = "!" + k
		case op == selection.GreaterThan:
			term = k + blank(rng) + ">" + blank(rng) + vals[0]
		case op == selection.LessThan:
			term = k + blank(rng) + "<" + blank(rng) + vals[0]
		}
		terms = append(terms, term)
	}
	return blank(rng) + joinShuffled(rng, terms, blank(rng)+","+blank(rng)) + blank(rng)
}

// rewriteFieldSelector writes the field selector s, which parses, in another
// equivalent way.
func rewriteFieldSelector(rng *rand.Rand, s string) string {
	sel, _ := fields.ParseSelector(s)
	var terms []string
	for _, r := range sel.Requirements() {
		field, value := strings.TrimSpace(r.Field), fields.EscapeValue(r.Value)
		if r.Operator == selection.NotEquals {
			terms = append(terms, field+"!="+value)
		} else {
			terms = append(terms, field+[]string{"=", "=="}[rng.IntN(2)]+value)
		}
	}
	return joinShuffled(rng, terms, ",")
}

// joinShuffled joins terms, shuffled, one of them maybe twice.
func joinShuffled(rng *rand.Rand, terms []string, sep string) string {
	if len(terms) > 0 && rng.IntN(2) == 0 {
		terms = append(terms, terms[rng.IntN(len(terms))])
	}
	rng.Shuffle(len(terms), func(i, j int) { terms[i], terms[j] = terms[j], terms[i] })
	return strings.Join(terms, sep)
}
