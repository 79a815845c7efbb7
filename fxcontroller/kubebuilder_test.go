package fxcontroller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/internal/testenv"
)

// ConfigMapReconciler is written the way kubebuilder scaffolds a
// reconciler, against controller-runtime's interfaces only: it knows nothing
// of fxkube.
type ConfigMapReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
}

const ownerAnnotation = "example.com/owned-by"

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *ConfigMapReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Annotations[ownerAnnotation] == "config-team" {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(cm.DeepCopy())
	metav1.SetMetaDataAnnotation(&cm.ObjectMeta, ownerAnnotation, "config-team")
	if err := r.Patch(ctx, &cm, patch); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(&cm, nil, corev1.EventTypeNormal, "Annotated", "Annotate", "owned by %s", "config-team")
	log.Info("annotated ConfigMap")
	return ctrl.Result{}, nil
}

// TestKubebuilderReconciler runs the reconciler above unchanged: fed by a
// shared store, writing through the client behind it.
func TestKubebuilderReconciler(t *testing.T) {
	e := newEnv(testenv.ConfigMap("a", "settings"))
	recorder := fxcontrollertest.NewRecorder(scheme)
	c, err := fxcontroller.New("configmap", e.configMaps(t), &ConfigMapReconciler{
		Client:   e.src.Client(),
		Scheme:   scheme,
		Recorder: recorder.GetEventRecorder("configmap"),
	})
	require.NoError(t, err)
	e.start(t, c)

	annotated := func(name string) func() bool {
		return func() bool {
			var cm corev1.ConfigMap
			err := e.src.Client().Get(t.Context(), client.ObjectKey{Namespace: "a", Name: name}, &cm)
			return err == nil && cm.Annotations[ownerAnnotation] == "config-team"
		}
	}
	require.Eventually(t, annotated("settings"), 5*time.Second, 10*time.Millisecond, "objects present at start")
	require.NoError(t, e.src.Client().Create(t.Context(), testenv.ConfigMap("a", "new")))
	require.Eventually(t, annotated("new"), 5*time.Second, 10*time.Millisecond, "objects created later")

	// Events are recorded after the patch.
	require.Eventually(t, func() bool { return len(recorder.Events()) == 2 }, 5*time.Second, 10*time.Millisecond)
	var notes []string
	for _, ev := range recorder.Events() {
		notes = append(notes, ev.String())
	}
	assert.ElementsMatch(t, []string{
		"Normal Annotated ConfigMap a/settings: owned by config-team",
		"Normal Annotated ConfigMap a/new: owned by config-team",
	}, notes)
}
