// Package writes checks the writes a controller declares, for the Writes
// options of fxcontroller and fxcluster, so that both say the same.
package writes

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Write is a kind of change a controller makes to the API server, declared
// with Writes so the app's RBAC rules can be derived from its modules.
// fxcontroller and fxcluster export it as their Write.
type Write struct {
	// Resource is the resource written, with its subresource if any, in
	// RBAC's terms: corev1.Resource("configmaps"),
	// appsv1.Resource("deployments/status").
	Resource schema.GroupResource
	// Verbs are RBAC verbs such as "create", "update", "patch" and
	// "delete", sorted.
	Verbs []string
}

func (w Write) String() string {
	return fmt.Sprintf("%s (%s)", w.Resource, strings.Join(w.Verbs, ","))
}

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
