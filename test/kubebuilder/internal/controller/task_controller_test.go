package controller_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/goleak"
	k8sbatchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
	"github.com/fxkube/fxkube/fxstore"
	batchv1 "github.com/fxkube/fxkube/test/kubebuilder/api/v1"
	"github.com/fxkube/fxkube/test/kubebuilder/internal/controller"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// module hosts the Task operator, unchanged: Setup is what its cmd/main.go
// would call between ctrl.NewManager and mgr.Start.
var module = fx.Module("task",
	fxstore.AddToScheme(batchv1.AddToScheme),
	fxcontroller.SetupWithManager(controller.Setup,
		fxcontroller.WithName("task-operator"),
		// Writes cannot be read from Go code: declare them for `rbac`.
		fxcontroller.Writes(batchv1.GroupVersion.WithResource("tasks").GroupResource(), "update"),
		fxcontroller.Writes(batchv1.GroupVersion.WithResource("tasks/status").GroupResource(), "update"),
		fxcontroller.Writes(k8sbatchv1.Resource("jobs"), "create", "delete"),
	),
)

// The hosted operator's reconciler runs without an API server, reading
// through its cache over in-memory stores and writing to a fake client.
func TestTaskReconcilerUnit(t *testing.T) {
	task := &batchv1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nightly"},
		Spec:       batchv1.TaskSpec{Image: "busybox", Parallelism: 2},
	}
	app := fxcontrollertest.New(t, module, task)
	key := client.ObjectKeyFromObject(task)

	// Each reconcile reads what the stores have seen of the last one's
	// writes, as on a cluster: reconcile until the Jobs are there.
	var jobs k8sbatchv1.JobList
	require.Eventually(t, func() bool {
		_, err := app.Reconcile(t.Context(), "task", key)
		require.NoError(t, err)
		require.NoError(t, app.Client().List(t.Context(), &jobs, client.InNamespace("default")))
		return len(jobs.Items) == 2
	}, 10*time.Second, 10*time.Millisecond)
	for _, job := range jobs.Items {
		owner := metav1.GetControllerOf(&job)
		require.NotNil(t, owner, "job %s", job.Name)
		assert.Equal(t, "nightly", owner.Name)
	}

	var got batchv1.Task
	require.NoError(t, app.Client().Get(t.Context(), key, &got))
	assert.Contains(t, got.Finalizers, batchv1.CleanupFinalizer)

	var created []string
	for _, e := range app.Events() {
		if e.Reason == "Created" {
			created = append(created, e.String())
		}
	}
	assert.ElementsMatch(t, []string{
		"Normal Created Task default/nightly: created job nightly-0",
		"Normal Created Task default/nightly: created job nightly-1",
	}, created)
}
