// Package v2 is the version of the Widget API that clients and the
// operator use; it is converted to and from v1, the storage version, by
// the operator's conversion webhook.
// +groupName=webhooks.example.fxkube.io
package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/controller-runtime/pkg/scheme"

	v1 "github.com/fxkube/fxkube/test/webhooks/api/v1"
)

var (
	// GroupVersion is the group and version of these types.
	GroupVersion = schema.GroupVersion{Group: "webhooks.example.fxkube.io", Version: "v2"}

	// SchemeBuilder adds the types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion} //nolint:staticcheck // what kubebuilder scaffolds

	// AddToScheme adds the types in this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// WidgetSpec is the desired state of a Widget. v2 renamed v1's Size to
// Replicas, so reading v1-stored objects as v2 needs the webhook.
type WidgetSpec struct {
	Replicas int32 `json:"replicas,omitempty"`
}

// Widget is what the operator reads and the webhooks admit.
// +kubebuilder:object:root=true
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec WidgetSpec `json:"spec,omitempty"`
}

// WidgetList is a list of Widgets.
// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

func init() { SchemeBuilder.Register(&Widget{}, &WidgetList{}) }

var _ conversion.Convertible = (*Widget)(nil)

// ConvertTo converts in to the hub, v1.
func (in *Widget) ConvertTo(dst conversion.Hub) error {
	hub := dst.(*v1.Widget)
	hub.ObjectMeta = in.ObjectMeta
	hub.Spec.Size = in.Spec.Replicas
	return nil
}

// ConvertFrom converts the hub, v1, to in.
func (in *Widget) ConvertFrom(src conversion.Hub) error {
	hub := src.(*v1.Widget)
	in.ObjectMeta = hub.ObjectMeta
	in.Spec.Replicas = hub.Spec.Size
	return nil
}

// DeepCopyObject implements runtime.Object.
func (in *Widget) DeepCopyObject() runtime.Object {
	out := *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (in *WidgetList) DeepCopyObject() runtime.Object {
	out := *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	out.Items = make([]Widget, len(in.Items))
	for i := range in.Items {
		out.Items[i] = *in.Items[i].DeepCopyObject().(*Widget)
	}
	return &out
}
