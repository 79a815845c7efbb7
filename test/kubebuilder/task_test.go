package kubebuilder_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8sbatchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/internal/testenv"
	batchv1 "github.com/fxkube/fxkube/test/kubebuilder/api/v1"
	"github.com/fxkube/fxkube/test/kubebuilder/internal/controller"
)

// operatorTests are the operator's behaviours. Each runs on every platform,
// in a namespace of its own, and sees the API server through c, which reads
// it directly.
var operatorTests = []struct {
	name string
	run  func(t *testing.T, c client.Client, ns string)
}{
	{"creates Jobs up to Parallelism", testCreatesJobs},
	{"replaces a finished Job", testReplacesFinishedJob},
	{"scales up and stops when suspended", testScalesAndSuspends},
	{"deletes its Jobs when deleted", testDeletesJobs},
	{"records an event per Job", testRecordsEvents},
}

// TestTaskOperator runs the operator on each platform in turn and asserts
// every behaviour of it on each.
func TestTaskOperator(t *testing.T) {
	installCRDs(t)
	c := newClient(t)
	kube, err := kubernetes.NewForConfig(testenv.Config(t))
	require.NoError(t, err)
	for _, p := range platforms {
		// t.Run returns once the parallel tests in it are done and the
		// platform's cleanup has stopped it: no two platforms run at once.
		t.Run(p.name, func(t *testing.T) {
			p.start(t, testenv.Config(t), controller.Setup)
			for _, tt := range operatorTests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					tt.run(t, c, testenv.Namespace(t, kube, p.name))
				})
			}
		})
	}
}

func testCreatesJobs(t *testing.T, c client.Client, ns string) {
	task := createTask(t, c, ns, batchv1.TaskSpec{Image: "busybox", Parallelism: 2})
	got := eventuallyTask(t, c, task, func(t *assert.CollectT, got *batchv1.Task) {
		assert.EqualValues(t, 2, got.Status.Active, "status.active")
		assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, batchv1.TaskReady), "Ready is true")
		assert.Equal(t, got.Generation, got.Status.ObservedGeneration, "status.observedGeneration")
	})

	jobs := requireJobs(t, c, ns)
	assert.ElementsMatch(t, []string{"task-0", "task-1"}, names(jobs))
	for _, job := range jobs {
		assert.True(t, metav1.IsControlledBy(&job, got), "the Task controls Job %s", job.Name)
		if containers := job.Spec.Template.Spec.Containers; assert.Len(t, containers, 1, "the containers of Job %s", job.Name) {
			assert.Equal(t, "busybox", containers[0].Image, "the image of Job %s", job.Name)
		}
	}
}

func testReplacesFinishedJob(t *testing.T, c client.Client, ns string) {
	task := createTask(t, c, ns, batchv1.TaskSpec{Image: "busybox", Parallelism: 2})
	eventuallyTask(t, c, task, func(t *assert.CollectT, got *batchv1.Task) {
		assert.EqualValues(t, 2, got.Status.Active, "status.active")
	})

	completeJob(t, c, ns, "task-0")
	eventuallyTask(t, c, task, func(t *assert.CollectT, got *batchv1.Task) {
		assert.EqualValues(t, 1, got.Status.Succeeded, "status.succeeded")
		assert.EqualValues(t, 2, got.Status.Active, "status.active")
	})
	jobs := requireJobs(t, c, ns)
	assert.ElementsMatch(t, []string{"task-0", "task-1", "task-2"}, names(jobs))
	assert.Equal(t, 2, unfinished(jobs), "unfinished Jobs")
}

func testScalesAndSuspends(t *testing.T, c client.Client, ns string) {
	task := createTask(t, c, ns, batchv1.TaskSpec{Image: "busybox", Parallelism: 2})
	eventuallyTask(t, c, task, func(t *assert.CollectT, got *batchv1.Task) {
		assert.EqualValues(t, 2, got.Status.Active, "status.active")
	})

	updateTask(t, c, task, func(task *batchv1.Task) { task.Spec.Parallelism = 3 })
	eventuallyTask(t, c, task, func(t *assert.CollectT, got *batchv1.Task) {
		assert.EqualValues(t, 3, got.Status.Active, "status.active")
		assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, batchv1.TaskReady), "Ready is true")
	})
	assert.Equal(t, 3, unfinished(requireJobs(t, c, ns)), "unfinished Jobs")

	// Suspended, the Task gets no more Jobs: not for a higher Parallelism,
	// nor to replace one that finishes.
	generation := updateTask(t, c, task, func(task *batchv1.Task) {
		task.Spec.Suspend = true
		task.Spec.Parallelism = 5
	})
	eventuallyTask(t, c, task, func(t *assert.CollectT, got *batchv1.Task) {
		assert.Equal(t, generation, got.Status.ObservedGeneration, "status.observedGeneration")
		ready := meta.FindStatusCondition(got.Status.Conditions, batchv1.TaskReady)
		if assert.NotNil(t, ready, "the Ready condition") {
			assert.Equal(t, metav1.ConditionFalse, ready.Status, "Ready")
			assert.Equal(t, "Suspended", ready.Reason, "Ready's reason")
		}
	})
	completeJob(t, c, ns, "task-0")
	// Once the operator has counted the finished Job, it has also decided
	// not to replace it.
	eventuallyTask(t, c, task, func(t *assert.CollectT, got *batchv1.Task) {
		assert.EqualValues(t, 1, got.Status.Succeeded, "status.succeeded")
		assert.EqualValues(t, 2, got.Status.Active, "status.active")
	})
	assert.ElementsMatch(t, []string{"task-0", "task-1", "task-2"}, names(requireJobs(t, c, ns)))
}

func testDeletesJobs(t *testing.T, c client.Client, ns string) {
	task := createTask(t, c, ns, batchv1.TaskSpec{Image: "busybox", Parallelism: 2})
	eventuallyTask(t, c, task, func(t *assert.CollectT, got *batchv1.Task) {
		assert.Contains(t, got.Finalizers, batchv1.CleanupFinalizer, "finalizers")
		assert.EqualValues(t, 2, got.Status.Active, "status.active")
	})

	// No garbage collector runs here: only the operator deletes the Jobs.
	require.NoError(t, c.Delete(t.Context(), task))
	eventuallyDeleted(t.Context(), t, c, task)
}

func testRecordsEvents(t *testing.T, c client.Client, ns string) {
	task := createTask(t, c, ns, batchv1.TaskSpec{Image: "busybox", Parallelism: 2})
	got := eventuallyTask(t, c, task, func(t *assert.CollectT, got *batchv1.Task) {
		assert.EqualValues(t, 2, got.Status.Active, "status.active")
	})

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var events eventsv1.EventList
		require.NoError(ct, c.List(t.Context(), &events, client.InNamespace(ns)))
		var created []string
		for _, e := range events.Items {
			if e.Regarding.Kind != "Task" || e.Regarding.UID != got.UID || e.Reason != "Created" {
				continue
			}
			assert.Equal(ct, corev1.EventTypeNormal, e.Type, "the type of event %s", e.Name)
			assert.Equal(ct, "CreateJob", e.Action, "the action of event %s", e.Name)
			if assert.NotNil(ct, e.Related, "the related object of event %s", e.Name) {
				created = append(created, e.Related.Name)
			}
		}
		assert.ElementsMatch(ct, []string{"task-0", "task-1"}, created, "the Jobs named by the Task's Created events")
	}, timeout, tick)
}

// createTask creates the Task "task" in ns. When the test ends it deletes
// it and waits until the operator has deleted its Jobs and let it go, so
// that the Task does not outlive the platform that runs the operator.
func createTask(t *testing.T, c client.Client, ns string, spec batchv1.TaskSpec) *batchv1.Task {
	t.Helper()
	task := &batchv1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "task"}, Spec: spec}
	require.NoError(t, c.Create(t.Context(), task))
	t.Cleanup(func() {
		// t.Context() is done by now.
		ctx := context.Background()
		require.NoError(t, client.IgnoreNotFound(c.Delete(ctx, task)))
		eventuallyDeleted(ctx, t, c, task)
	})
	return task
}

// updateTask applies change to the Task's latest version until the update
// goes through, and returns the Task's new generation.
func updateTask(t *testing.T, c client.Client, task *batchv1.Task, change func(*batchv1.Task)) int64 {
	t.Helper()
	var got batchv1.Task
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(task), &got); err != nil {
			return err
		}
		change(&got)
		return c.Update(t.Context(), &got)
	}))
	return got.Generation
}

// eventuallyTask waits until the Task as the API server has it passes
// check, and returns it.
func eventuallyTask(t *testing.T, c client.Client, task *batchv1.Task, check func(*assert.CollectT, *batchv1.Task)) *batchv1.Task {
	t.Helper()
	var got batchv1.Task
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got = batchv1.Task{}
		require.NoError(ct, c.Get(t.Context(), client.ObjectKeyFromObject(task), &got))
		check(ct, &got)
	}, timeout, tick)
	return &got
}

// eventuallyDeleted waits until task is gone, and every Job in its namespace
// with it.
func eventuallyDeleted(ctx context.Context, t *testing.T, c client.Client, task *batchv1.Task) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		err := c.Get(ctx, client.ObjectKeyFromObject(task), &batchv1.Task{})
		assert.True(ct, apierrors.IsNotFound(err), "the Task is gone: get returns %v", err)
		var jobs k8sbatchv1.JobList
		require.NoError(ct, c.List(ctx, &jobs, client.InNamespace(task.Namespace)))
		assert.Empty(ct, names(jobs.Items), "the Jobs left")
	}, timeout, tick)
}

// completeJob marks the Job ns/name complete, as the Job controller would
// if it ran here. The API server accepts Complete=True only with what the
// Job controller sets with it: SuccessCriteriaMet=True, a startTime, and a
// completionTime not before it.
func completeJob(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	var job k8sbatchv1.Job
	require.NoError(t, c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &job))
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.CompletionTime = &now
	job.Status.Succeeded = 1
	job.Status.Conditions = append(job.Status.Conditions,
		k8sbatchv1.JobCondition{Type: k8sbatchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		k8sbatchv1.JobCondition{Type: k8sbatchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
	)
	require.NoError(t, c.Status().Update(t.Context(), &job), "complete Job %s", name)
}

// requireJobs returns the Jobs in ns.
func requireJobs(t *testing.T, c client.Client, ns string) []k8sbatchv1.Job {
	t.Helper()
	var jobs k8sbatchv1.JobList
	require.NoError(t, c.List(t.Context(), &jobs, client.InNamespace(ns)))
	return jobs.Items
}

// unfinished counts the jobs that completeJob has not completed.
func unfinished(jobs []k8sbatchv1.Job) int {
	n := 0
	for _, job := range jobs {
		complete := slices.ContainsFunc(job.Status.Conditions, func(c k8sbatchv1.JobCondition) bool {
			return c.Type == k8sbatchv1.JobComplete && c.Status == corev1.ConditionTrue
		})
		if !complete {
			n++
		}
	}
	return n
}

// names returns the names of jobs.
func names(jobs []k8sbatchv1.Job) []string {
	names := make([]string, 0, len(jobs))
	for _, job := range jobs {
		names = append(names, job.Name)
	}
	return names
}
