package fxstore

import (
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/fxkube/fxkube/internal/kinds"
)

var (
	unstructuredType = reflect.TypeFor[*unstructured.Unstructured]()
	metadataType     = reflect.TypeFor[*metav1.PartialObjectMetadata]()
)

// keyFor resolves the kind and projection of a store of typ and canonicalises
// spec into its key. It returns an example object of typ for the informer.
func (r *Registry) keyFor(typ reflect.Type, spec Spec) (Key, k8sruntime.Object, error) {
	key, example, err := r.specKey(typ, spec)
	key.Cluster = r.cluster
	return key, example, err
}

// specKey is keyFor without the cluster.
func (r *Registry) specKey(typ reflect.Type, spec Spec) (Key, k8sruntime.Object, error) {
	if typ.Kind() != reflect.Pointer || typ.Elem().Kind() != reflect.Struct {
		key, _ := spec.key(spec.Kind, Typed, &r.selectors)
		return key, nil, fmt.Errorf("%s is not a pointer to a struct; ask for a store of a Kubernetes object type such as *corev1.ConfigMap", typ)
	}
	example := reflect.New(typ.Elem()).Interface().(k8sruntime.Object)
	var (
		gvk  = spec.Kind
		proj = Typed
	)
	switch typ {
	case unstructuredType:
		proj = Unstructured
	case metadataType:
		proj = Metadata
	default:
		scheme, err := apiutil.GVKForObject(example, r.scheme)
		if err != nil {
			key, _ := spec.key(spec.Kind, Typed, &r.selectors)
			return key, nil, fmt.Errorf("type %s is not in the scheme; register its package with fxstore.AddToScheme: %w", typ, err)
		}
		if !gvk.Empty() && gvk != scheme {
			key, _ := spec.key(scheme, Typed, &r.selectors)
			return key, nil, fmt.Errorf("Spec.Kind %s does not match %s, which the scheme registers as %s; leave Spec.Kind empty",
				kinds.Name(gvk), typ, kinds.Name(scheme))
		}
		gvk = scheme
	}
	key, err := spec.key(gvk, proj, &r.selectors)
	return key, example, err
}
