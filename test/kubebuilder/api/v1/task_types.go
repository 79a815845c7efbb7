package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// TaskReady is the type of the condition that says whether a Task has
	// as many unfinished Jobs as its Spec.Parallelism asks for.
	TaskReady = "Ready"

	// CleanupFinalizer keeps a deleted Task until the operator has deleted
	// its Jobs.
	CleanupFinalizer = "batch.example.fxkube.io/cleanup"
)

// TaskSpec defines the desired state of Task.
type TaskSpec struct {
	// Image is the container image that each of the Task's Jobs runs.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`

	// Parallelism is the number of unfinished Jobs to keep: when one
	// finishes, another is created.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Parallelism int32 `json:"parallelism,omitempty"`

	// Suspend stops the creation of Jobs; the Jobs that exist are left alone.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// TaskStatus defines the observed state of Task.
type TaskStatus struct {
	// Active is the number of the Task's Jobs that have not finished.
	// +optional
	Active int32 `json:"active,omitempty"`

	// Succeeded is the number of the Task's Jobs that have completed.
	// +optional
	Succeeded int32 `json:"succeeded,omitempty"`

	// Conditions represent the latest observations of the Task's state.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration is the metadata.generation of the Task that this
	// status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status

// Task is the Schema for the tasks API.
type Task struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TaskSpec   `json:"spec,omitempty"`
	Status TaskStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TaskList contains a list of Task.
type TaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Task `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Task{}, &TaskList{})
}
