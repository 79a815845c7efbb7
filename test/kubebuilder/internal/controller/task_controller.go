package controller

import (
	"context"
	"fmt"

	k8sbatchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	batchv1 "github.com/fxkube/fxkube/test/kubebuilder/api/v1"
)

// jobOwnerKey indexes Jobs by the name of the Task that controls them, so
// that Reconcile finds a Task's Jobs in the cache without going through
// every Job of the namespace.
const jobOwnerKey = ".metadata.controller"

// TaskReconciler reconciles a Task object: it keeps Spec.Parallelism of the
// Task's Jobs unfinished and reports them in the Task's status.
type TaskReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=batch.example.fxkube.io,resources=tasks,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch.example.fxkube.io,resources=tasks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch.example.fxkube.io,resources=tasks/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs/status,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves the Task named by req towards its spec: it counts the
// Task's Jobs into its status and creates Jobs until Spec.Parallelism of
// them are unfinished. When the Task is being deleted it deletes its Jobs
// instead.
func (r *TaskReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	var task batchv1.Task
	if err := r.Get(ctx, req.NamespacedName, &task); err != nil {
		// Not found: the Task is gone, and its Jobs went before it (see the
		// finalizer below), so there is nothing left to do.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	var jobs k8sbatchv1.JobList
	if err := r.List(ctx, &jobs, client.InNamespace(req.Namespace), client.MatchingFields{jobOwnerKey: req.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list jobs: %w", err)
	}

	if task.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(&task, batchv1.CleanupFinalizer) {
			controllerutil.AddFinalizer(&task, batchv1.CleanupFinalizer)
			if err := r.Update(ctx, &task); err != nil {
				return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
			}
		}
	} else {
		if controllerutil.ContainsFinalizer(&task, batchv1.CleanupFinalizer) {
			for i := range jobs.Items {
				// Background, as the API server's default for batch/v1
				// orphans the Job's Pods through a finalizer on the Job
				// that only the garbage collector removes: where none runs
				// (envtest), the Job would stay.
				err := r.Delete(ctx, &jobs.Items[i], client.PropagationPolicy(metav1.DeletePropagationBackground))
				if client.IgnoreNotFound(err) != nil {
					return ctrl.Result{}, fmt.Errorf("delete job %s: %w", jobs.Items[i].Name, err)
				}
			}
			controllerutil.RemoveFinalizer(&task, batchv1.CleanupFinalizer)
			// Not found: an earlier reconcile removed the finalizer, and the
			// Task went before the cache saw it go.
			if err := r.Update(ctx, &task); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
			}
		}
		return ctrl.Result{}, nil
	}

	// Status is rebuilt from the Jobs every time rather than read back, so
	// that it says what the cache saw: Active counts only Jobs this
	// reconcile found, not the ones it is about to create.
	var active, succeeded int32
	names := make(map[string]bool, len(jobs.Items))
	for _, job := range jobs.Items {
		names[job.Name] = true
		switch _, finishedType := isJobFinished(&job); finishedType {
		case "": // ongoing
			active++
		case k8sbatchv1.JobComplete:
			succeeded++
		}
	}
	old := task.Status.DeepCopy()
	task.Status.Active = active
	task.Status.Succeeded = succeeded
	task.Status.ObservedGeneration = task.Generation
	meta.SetStatusCondition(&task.Status.Conditions, readyCondition(&task, active))
	if !equality.Semantic.DeepEqual(old, &task.Status) {
		if err := r.Status().Update(ctx, &task); err != nil {
			return ctrl.Result{}, fmt.Errorf("update status: %w", err)
		}
	}
	log.V(1).Info("job count", "active jobs", active, "successful jobs", succeeded)

	if task.Spec.Suspend {
		log.V(1).Info("task suspended, skipping")
		return ctrl.Result{}, nil
	}

	// Jobs are named <task>-<n>, taking the lowest n no Job has, so that a
	// reconcile on a cache that lags behind its own creations tries the name
	// of a Job that exists instead of creating one Job too many.
	for n := 0; active < task.Spec.Parallelism; n++ {
		name := fmt.Sprintf("%s-%d", task.Name, n)
		if names[name] {
			continue
		}
		job, err := r.jobForTask(&task, name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, job); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// The cache has not seen this Job yet. It is ours, so its
				// event brings the Task back on a cache that has.
				log.V(1).Info("job exists but is not in the cache yet", "job", name)
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, fmt.Errorf("create job %s: %w", name, err)
		}
		r.Recorder.Eventf(&task, job, corev1.EventTypeNormal, "Created", "CreateJob", "created job %s", job.Name)
		log.V(1).Info("created Job for Task", "job", name)
		active++
	}
	return ctrl.Result{}, nil
}

// isJobFinished reports whether job has finished, which its Complete or
// Failed condition says when true, and which of the two it is.
func isJobFinished(job *k8sbatchv1.Job) (bool, k8sbatchv1.JobConditionType) {
	for _, c := range job.Status.Conditions {
		if (c.Type == k8sbatchv1.JobComplete || c.Type == k8sbatchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

// readyCondition says whether task, which has active unfinished Jobs, has
// all the Jobs it asks for.
func readyCondition(task *batchv1.Task, active int32) metav1.Condition {
	c := metav1.Condition{
		Type:               batchv1.TaskReady,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: task.Generation,
		Reason:             "Running",
		Message:            fmt.Sprintf("%d of %d Jobs are unfinished", active, task.Spec.Parallelism),
	}
	switch {
	case task.Spec.Suspend:
		c.Status, c.Reason = metav1.ConditionFalse, "Suspended"
		c.Message += "; the Task is suspended, so no Jobs are created"
	case active < task.Spec.Parallelism:
		c.Status, c.Reason = metav1.ConditionFalse, "Scaling"
	}
	return c
}

// jobForTask returns the Job called name that task runs, controlled by task
// so that its events come back to the Task and the index finds it.
func (r *TaskReconciler) jobForTask(task *batchv1.Task, name string) (*k8sbatchv1.Job, error) {
	job := &k8sbatchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: task.Namespace,
		},
		Spec: k8sbatchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "task", Image: task.Spec.Image}},
				},
			},
		},
	}
	if err := controllerutil.SetControllerReference(task, job, r.Scheme); err != nil {
		return nil, fmt.Errorf("own job %s: %w", name, err)
	}
	return job, nil
}

// SetupWithManager sets up the controller with the Manager.
func (r *TaskReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &k8sbatchv1.Job{}, jobOwnerKey, func(rawObj client.Object) []string {
		// Only a Job that a Task controls is indexed, under the Task's name;
		// the index is per namespace already.
		owner := metav1.GetControllerOf(rawObj.(*k8sbatchv1.Job))
		if owner == nil || owner.APIVersion != batchv1.GroupVersion.String() || owner.Kind != "Task" {
			return nil
		}
		return []string{owner.Name}
	}); err != nil {
		return fmt.Errorf("index jobs by their task: %w", err)
	}

	return ctrl.NewControllerManagedBy(mgr).
		For(&batchv1.Task{}).
		Owns(&k8sbatchv1.Job{}).
		Named("task").
		Complete(r)
}
