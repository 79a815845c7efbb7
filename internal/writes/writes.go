// Package writes checks the writes a controller declares, for the Writes
// options of fxcontroller and fxcluster, so that both say the same.
package writes

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Check returns verbs sorted, without repeats, or why resource and verbs
// cannot be granted.
func Check(resource schema.GroupResource, verbs []string) ([]string, []error) {
	var errs []error
	if resource.Resource == "" {
		errs = append(errs, fmt.Errorf("Writes(%q): resource is empty; name it in RBAC's terms, such as corev1.Resource(\"configmaps\")", resource))
	}
	if len(verbs) == 0 {
		errs = append(errs, fmt.Errorf("Writes(%q): no verbs; say how it is written, such as \"update\"", resource))
	}
	for _, v := range verbs {
		if v == "" || strings.ContainsAny(v, " ,") {
			errs = append(errs, fmt.Errorf("Writes(%q): invalid verb %q", resource, v))
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return slices.Compact(slices.Sorted(slices.Values(verbs))), nil
}
