// Package listwatch lists and watches the objects of a store's key through
// a controller-runtime client: the list and watch calls an API server
// source makes, and the lists an in-memory source fills.
package listwatch

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxstore"
)

// New returns a ListerWatcher of the objects key selects, listed and
// watched through c in the key's projection.
func New(c client.WithWatch, key fxstore.Key) (cache.ListerWatcher, error) {
	newList, err := Lists(c.Scheme(), key)
	if err != nil {
		return nil, err
	}
	// Keys hold canonical selectors, which parse.
	lsel, _ := labels.Parse(key.LabelSelector)
	fsel, _ := fields.ParseSelector(key.FieldSelector)
	opts := func(raw metav1.ListOptions) *client.ListOptions {
		raw.ShardSelector = key.Shard
		// controller-runtime takes a list's page from Limit and Continue,
		// not from Raw's.
		return &client.ListOptions{Raw: &raw, Namespace: key.Namespace, LabelSelector: lsel, FieldSelector: fsel,
			Limit: raw.Limit, Continue: raw.Continue}
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (k8sruntime.Object, error) {
			list := newList()
			if err := c.List(ctx, list, opts(o)); err != nil {
				return nil, err
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, newList(), opts(o))
		},
	}, nil
}

// Lists returns a function making empty lists of the key's objects in its
// projection.
func Lists(scheme *k8sruntime.Scheme, key fxstore.Key) (func() client.ObjectList, error) {
	listKind := key.Kind.GroupVersion().WithKind(key.Kind.Kind + "List")
	switch key.Projection {
	case fxstore.Unstructured:
		return func() client.ObjectList {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(listKind)
			return l
		}, nil
	case fxstore.Metadata:
		return func() client.ObjectList {
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(listKind)
			return l
		}, nil
	}
	example, err := scheme.New(listKind)
	if err != nil {
		return nil, fmt.Errorf("list type %s of store %s is not in the scheme: %w", listKind.Kind, key, err)
	}
	if _, ok := example.(client.ObjectList); !ok {
		return nil, fmt.Errorf("%T is not a client.ObjectList", example)
	}
	return func() client.ObjectList {
		l, _ := scheme.New(listKind)
		return l.(client.ObjectList)
	}, nil
}
