package fxcontrollertest_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/fxkube/fxkube/fxcontroller/fxcontrollertest"
)

// A Recorder stands in for the API server's events: hand a reconciler one of
// its recorders, then check what it recorded.
func ExampleRecorder() {
	rec := fxcontrollertest.NewRecorder(clientgoscheme.Scheme)
	reconcilerEvents := rec.GetEventRecorder("rollout")

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	reconcilerEvents.Eventf(cm, nil, corev1.EventTypeWarning, "Invalid", "Validate", "key %q is not a number", "replicas")

	for _, e := range rec.Events() {
		fmt.Println(e.Controller, e.Action, e)
	}
	// Output:
	// rollout Validate Warning Invalid ConfigMap default/settings: key "replicas" is not a number
}
