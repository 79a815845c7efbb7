package selectors_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fxkube/fxkube/internal/selectors"
)

// FuzzLabel checks that canonical forms are fixed points,
// select what the original selects, and do not depend on the order terms
// are written in.
func FuzzLabel(f *testing.F) {
	for _, seed := range []string{
		"", "a=1", "a=1,b=2", " b=2, a=1", "a==1", "a in (1)", "a notin (x,y)", "!a,b",
		"env in (prod, dev),tier", "x!=1,x!=1", "a.b/c=d", "a=(", "a in ()", "a,,b", "a>1", "a<2",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		canon, err := selectors.Label(s)
		if err != nil {
			return
		}
		again, err := selectors.Label(canon)
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
			if rev, err := selectors.Label(strings.Join(terms, ",")); err == nil && rev != canon {
				t.Fatalf("%q and its reverse give %q and %q", s, canon, rev)
			}
		}
	})
}

// FuzzField checks that canonical field selectors are fixed
// points and independent of term order.
func FuzzField(f *testing.F) {
	for _, seed := range []string{"", "metadata.name=x", "a=1,b!=2", "b!=2, a==1", `a=x\,y`, "a", "a=1,a=1"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		canon, err := selectors.Field(s)
		if err != nil {
			return
		}
		again, err := selectors.Field(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, s, err)
		}
		if again != canon {
			t.Fatalf("canonicalising %q twice: %q then %q", s, canon, again)
		}
	})
}

func TestLabel(t *testing.T) {
	tests := []struct {
		give    string
		want    string
		wantErr string
	}{
		{give: "", want: ""},
		{give: "a=1,b=2", want: "a=1,b=2"},
		{give: " b=2, a=1", want: "a=1,b=2"},
		{give: "a==1", want: "a=1"},
		{give: "a=1,a=1", want: "a=1"},
		{give: "a in (1)", want: "a=1"},
		{give: "a notin (1)", want: "a!=1"},
		{give: "env in (prod, dev),tier", want: "env in (dev,prod),tier"},
		{give: "tier, env in (dev,prod)", want: "env in (dev,prod),tier"},
		{give: "!legacy,app=web", want: "!legacy,app=web"},
		{give: "app=web,!legacy", want: "!legacy,app=web"},
		{give: "x notin (b,a),y!=2", want: "x notin (a,b),y!=2"},
		{give: "a=(", wantErr: `invalid label selector "a=("`},
		{give: "-bad-=1", wantErr: "invalid label selector"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := selectors.Label(tt.give)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := selectors.Label(got)
			require.NoError(t, err)
			assert.Equal(t, got, again, "canonicalising twice changes nothing")
		})
	}
}

func TestField(t *testing.T) {
	tests := []struct {
		give    string
		want    string
		wantErr string
	}{
		{give: "", want: ""},
		{give: "metadata.name=x", want: "metadata.name=x"},
		{give: "status.phase!=Running, metadata.name==x", want: "metadata.name=x,status.phase!=Running"},
		{give: "metadata.name=x,metadata.name=x", want: "metadata.name=x"},
		{give: `metadata.name=a\,b`, want: `metadata.name=a\,b`},
		{give: "metadata.name", wantErr: `invalid field selector "metadata.name"`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := selectors.Field(tt.give)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			again, err := selectors.Field(got)
			require.NoError(t, err)
			assert.Equal(t, got, again)
		})
	}
}

func TestRejectControlCharacters(t *testing.T) {
	_, err := selectors.Label("a=1,\x00b=2")
	require.ErrorContains(t, err, `control character '\x00' at byte 4`)
	_, err = selectors.Field("metadata.name=\x01")
	require.ErrorContains(t, err, "control character")
	got, err := selectors.Label("a=1,\tb=2\n")
	require.NoError(t, err)
	assert.Equal(t, "a=1,b=2", got)
}
