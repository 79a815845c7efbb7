package mirror

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// parseTargets parses the value of TargetsAnnotation on a source in
// namespace own: comma-separated namespace names, blanks around them
// ignored. It returns the valid targets, in order and without duplicates,
// and one problem for each entry it ignores: empty, not a namespace name, or
// own.
func parseTargets(value, own string) (targets []string, problems []string) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	for entry := range strings.SplitSeq(value, ",") {
		ns := strings.TrimSpace(entry)
		switch msgs := validation.IsDNS1123Label(ns); {
		case ns == "":
			problems = append(problems, "empty entry")
		case len(msgs) > 0:
			problems = append(problems, fmt.Sprintf("%q is not a namespace name: %s", abbreviate(ns), msgs[0]))
		case ns == own:
			problems = append(problems, fmt.Sprintf("%q is the source's own namespace", ns))
		case !slices.Contains(targets, ns):
			targets = append(targets, ns)
		}
	}
	return targets, problems
}

// abbreviate shortens s to fit in an Event's note, which the API server
// limits to 1 kB.
func abbreviate(s string) string {
	const limit = 80
	if len(s) <= limit {
		return s
	}
	return s[:limit-3] + "..."
}
