package mirror

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestParseTargets(t *testing.T) {
	tests := []struct {
		give         string
		wantTargets  []string
		wantProblems []string
	}{
		{give: ""},
		{give: "  "},
		{give: "a", wantTargets: []string{"a"}},
		{give: " b , a,b,a ", wantTargets: []string{"b", "a"}},
		{give: "a,", wantTargets: []string{"a"}, wantProblems: []string{"empty entry"}},
		{give: ",", wantProblems: []string{"empty entry", "empty entry"}},
		{give: "own,a", wantTargets: []string{"a"}, wantProblems: []string{`"own" is the source's own namespace`}},
		{give: "a/b", wantProblems: []string{`"a/b" is not a namespace name: ` + validation.IsDNS1123Label("a/b")[0]}},
		{
			give:         strings.Repeat("x", 100),
			wantProblems: []string{`"` + strings.Repeat("x", 77) + `..." is not a namespace name: must be no more than 63 characters`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			targets, problems := parseTargets(tt.give, "own")
			assert.Equal(t, tt.wantTargets, targets)
			assert.Equal(t, tt.wantProblems, problems)
		})
	}
}

// FuzzParseTargets checks that every entry of the annotation is either a
// target or a problem, and that targets are valid, unique and not the
// source's namespace. Its seed corpus is in testdata/fuzz.
func FuzzParseTargets(f *testing.F) {
	f.Fuzz(func(t *testing.T, value, own string) {
		targets, problems := parseTargets(value, own)
		if strings.TrimSpace(value) == "" {
			assert.Empty(t, targets)
			assert.Empty(t, problems)
			return
		}
		entries := strings.Split(value, ",")
		var duplicates int
		seen := map[string]bool{}
		for i, e := range entries {
			e = strings.TrimSpace(e)
			entries[i] = e
			if seen[e] && len(validation.IsDNS1123Label(e)) == 0 && e != own {
				duplicates++
			}
			seen[e] = true
		}
		assert.Len(t, entries, len(targets)+len(problems)+duplicates)
		for _, ns := range targets {
			assert.Empty(t, validation.IsDNS1123Label(ns))
			assert.NotEqual(t, own, ns)
			assert.Contains(t, entries, ns, "a target is an entry")
		}
		assert.Len(t, slices.Compact(slices.Sorted(slices.Values(targets))), len(targets), "targets are unique")
	})
}
