// Package kinds names Kubernetes kinds the way fxkube's messages and
// metrics do.
package kinds

import "k8s.io/apimachinery/pkg/runtime/schema"

// Name names a kind as Kind.group/version ("Deployment.apps/v1",
// "ConfigMap/v1" for the core group).
func Name(gvk schema.GroupVersionKind) string {
	kind := gvk.Kind
	if kind == "" {
		kind = "<no kind>"
	}
	if gvk.Group == "" {
		return kind + "/" + gvk.Version
	}
	return kind + "." + gvk.Group + "/" + gvk.Version
}
