package controller

import (
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// Setup adds the operator to mgr, as a kubebuilder cmd/main.go does between
// ctrl.NewManager and mgr.Start: the Task controller, and health and
// readiness checks.
func Setup(mgr ctrl.Manager) error {
	if err := (&TaskReconciler{
		Client:   mgr.GetClient(),
		Scheme:   mgr.GetScheme(),
		Recorder: mgr.GetEventRecorder("task-controller"),
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the task controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("set up the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("set up the ready check: %w", err)
	}
	return nil
}
