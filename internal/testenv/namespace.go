package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Namespace creates a namespace through kube and returns its name: prefix,
// a dash and a suffix the API server generates, so that tests, and runs
// with -count, keep apart. The namespace outlives the test unless an
// option says otherwise:
//
//	ns := testenv.Namespace(t, kube, "fxshard", testenv.DeleteAtEnd)
func Namespace(tb testing.TB, kube kubernetes.Interface, prefix string, opts ...NamespaceOption) string {
	tb.Helper()
	var o namespaceOptions
	for _, opt := range opts {
		opt.applyToNamespace(&o)
	}
	ns, err := kube.CoreV1().Namespaces().Create(tb.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatalf("create a namespace %s-: %v", prefix, err)
	}
	if o.deleteAtEnd {
		tb.Cleanup(func() {
			// tb.Context() is done by now.
			if err := kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}); err != nil {
				tb.Errorf("delete namespace %s: %v", ns.Name, err)
			}
		})
	}
	return ns.Name
}

// NamespaceOption is an option of [Namespace].
type NamespaceOption interface {
	applyToNamespace(*namespaceOptions)
}

type namespaceOptions struct {
	deleteAtEnd bool
}

// DeleteAtEnd has [Namespace] delete the namespace when the test ends, and
// fail the test if it cannot. The control plane runs no namespace
// controller, so the namespace then stays, terminating, and takes no new
// objects.
var DeleteAtEnd NamespaceOption = deleteAtEnd{}

type deleteAtEnd struct{}

func (deleteAtEnd) applyToNamespace(o *namespaceOptions) { o.deleteAtEnd = true }
