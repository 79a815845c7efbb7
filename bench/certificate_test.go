package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The typed custom kind: a Certificate shaped as cert-manager's, whose
// users report caches of 6–30k of them. Its objects repeat most of what
// they hold (issuer, key settings, usages, the Ready condition's text);
// names and dates differ.

var certificateGroupVersion = schema.GroupVersion{Group: "bench.fxkube.io", Version: "v1"}

// Certificate is a typed custom object, as a kubebuilder project has one.
type Certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CertificateSpec   `json:"spec"`
	Status CertificateStatus `json:"status,omitempty"`
}

// CertificateSpec is what a Certificate asks for.
type CertificateSpec struct {
	SecretName     string           `json:"secretName"`
	CommonName     string           `json:"commonName,omitempty"`
	DNSNames       []string         `json:"dnsNames,omitempty"`
	Duration       *metav1.Duration `json:"duration,omitempty"`
	RenewBefore    *metav1.Duration `json:"renewBefore,omitempty"`
	IssuerRef      IssuerReference  `json:"issuerRef"`
	PrivateKey     *PrivateKey      `json:"privateKey,omitempty"`
	Usages         []string         `json:"usages,omitempty"`
	SecretTemplate *SecretTemplate  `json:"secretTemplate,omitempty"`
}

// IssuerReference names who signs a Certificate.
type IssuerReference struct {
	Name  string `json:"name"`
	Kind  string `json:"kind,omitempty"`
	Group string `json:"group,omitempty"`
}

// PrivateKey is how a Certificate's key is made.
type PrivateKey struct {
	Algorithm      string `json:"algorithm,omitempty"`
	Size           int    `json:"size,omitempty"`
	Encoding       string `json:"encoding,omitempty"`
	RotationPolicy string `json:"rotationPolicy,omitempty"`
}

// SecretTemplate is what the Certificate's Secret carries.
type SecretTemplate struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// CertificateStatus is what the issuer last did.
type CertificateStatus struct {
	Conditions  []metav1.Condition `json:"conditions,omitempty"`
	NotBefore   *metav1.Time       `json:"notBefore,omitempty"`
	NotAfter    *metav1.Time       `json:"notAfter,omitempty"`
	RenewalTime *metav1.Time       `json:"renewalTime,omitempty"`
	Revision    *int               `json:"revision,omitempty"`
}

// CertificateList is a list of Certificates.
type CertificateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Certificate `json:"items"`
}

func addCertificates(s *runtime.Scheme) error {
	s.AddKnownTypes(certificateGroupVersion, &Certificate{}, &CertificateList{})
	metav1.AddToGroupVersion(s, certificateGroupVersion)
	return nil
}

// DeepCopyObject implements runtime.Object.
func (in *Certificate) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopy copies every part, as controller-gen's would.
func (in *Certificate) DeepCopy() *Certificate {
	out := *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	s := &out.Spec
	s.DNSNames = slices.Clone(in.Spec.DNSNames)
	s.Usages = slices.Clone(in.Spec.Usages)
	s.Duration = ptrCopy(in.Spec.Duration)
	s.RenewBefore = ptrCopy(in.Spec.RenewBefore)
	s.PrivateKey = ptrCopy(in.Spec.PrivateKey)
	if t := in.Spec.SecretTemplate; t != nil {
		s.SecretTemplate = &SecretTemplate{Labels: maps.Clone(t.Labels), Annotations: maps.Clone(t.Annotations)}
	}
	st := &out.Status
	if in.Status.Conditions != nil {
		st.Conditions = make([]metav1.Condition, len(in.Status.Conditions))
		for i := range in.Status.Conditions {
			in.Status.Conditions[i].DeepCopyInto(&st.Conditions[i])
		}
	}
	st.NotBefore, st.NotAfter, st.RenewalTime = in.Status.NotBefore.DeepCopy(), in.Status.NotAfter.DeepCopy(), in.Status.RenewalTime.DeepCopy()
	st.Revision = ptrCopy(in.Status.Revision)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (in *CertificateList) DeepCopyObject() runtime.Object {
	out := *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Certificate, len(in.Items))
		for i := range in.Items {
			out.Items[i] = *in.Items[i].DeepCopy()
		}
	}
	return &out
}

func ptrCopy[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// certificateCRD serves Certificates with a status subresource; the
// schema keeps every field, as a generated one would accept them.
var certificateCRD = &apiextensionsv1.CustomResourceDefinition{
	ObjectMeta: metav1.ObjectMeta{Name: "certificates." + certificateGroupVersion.Group},
	Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: certificateGroupVersion.Group,
		Names: apiextensionsv1.CustomResourceDefinitionNames{
			Kind: "Certificate", ListKind: "CertificateList", Plural: "certificates", Singular: "certificate",
		},
		Scope: apiextensionsv1.NamespaceScoped,
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
			Name: certificateGroupVersion.Version, Served: true, Storage: true,
			Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec":   {Type: "object", XPreserveUnknownFields: ptr.To(true)},
					"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
				},
			}},
		}},
	},
}

// issued is when the workload's Certificates were signed.
var issued = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

// newCertificate returns the i-th Certificate, issued and Ready.
func newCertificate(i int) *Certificate {
	host := fmt.Sprintf("svc-%05d.%s.example.com", i, namespaceOf(i))
	notBefore := metav1.NewTime(issued.Add(time.Duration(i%3600) * time.Second))
	notAfter := metav1.NewTime(notBefore.Add(90 * 24 * time.Hour))
	renewal := metav1.NewTime(notAfter.Add(-30 * 24 * time.Hour))
	meta := objectMeta(i, map[string]string{"app.kubernetes.io/managed-by": "platform", "team": teamOf(i)})
	meta.Annotations = map[string]string{versionAnnotation: "1"}
	return &Certificate{
		TypeMeta:   metav1.TypeMeta{APIVersion: certificateGroupVersion.String(), Kind: "Certificate"},
		ObjectMeta: meta,
		Spec: CertificateSpec{
			SecretName:  nameOf(i) + "-tls",
			CommonName:  host,
			DNSNames:    []string{host, "svc-" + fmt.Sprint(i) + "." + namespaceOf(i) + ".svc.cluster.local"},
			Duration:    &metav1.Duration{Duration: 90 * 24 * time.Hour},
			RenewBefore: &metav1.Duration{Duration: 30 * 24 * time.Hour},
			IssuerRef:   IssuerReference{Name: "letsencrypt-prod", Kind: "ClusterIssuer", Group: "cert-manager.io"},
			PrivateKey:  &PrivateKey{Algorithm: "ECDSA", Size: 256, Encoding: "PKCS1", RotationPolicy: "Always"},
			Usages:      []string{"digital signature", "key encipherment", "server auth"},
			SecretTemplate: &SecretTemplate{
				Labels:      map[string]string{"app.kubernetes.io/managed-by": "platform", "team": teamOf(i)},
				Annotations: map[string]string{"reflector.v1.k8s.emberstack.com/reflection-allowed": "true"},
			},
		},
		Status: CertificateStatus{
			Conditions: []metav1.Condition{{
				Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: 1,
				Message:            "Certificate is up to date and has not expired",
				LastTransitionTime: notBefore,
			}},
			NotBefore: &notBefore, NotAfter: &notAfter, RenewalTime: &renewal,
			Revision: ptr.To(1),
		},
	}
}

// certificatesPath is the REST path of a namespace's Certificates.
func certificatesPath(namespace string) string {
	return "/apis/" + certificateGroupVersion.String() + "/namespaces/" + namespace + "/certificates"
}

// certificateKind writes Certificates as JSON through the clientset's
// REST client, which has no Go client for them.
var certificateKind = objectKind{
	create: func(ctx context.Context, kube kubernetes.Interface, i int) error {
		c := newCertificate(i)
		body, err := json.Marshal(c)
		if err != nil {
			return err
		}
		rc := kube.Discovery().RESTClient()
		err = rc.Post().AbsPath(certificatesPath(c.Namespace)).SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		status, err := json.Marshal(map[string]any{"status": c.Status})
		if err != nil {
			return err
		}
		return rc.Patch(types.MergePatchType).AbsPath(certificatesPath(c.Namespace), c.Name, "status").Body(status).Do(ctx).Error()
	},
	delete: func(ctx context.Context, kube kubernetes.Interface, i int) error {
		err := kube.Discovery().RESTClient().Delete().AbsPath(certificatesPath(namespaceOf(i)), nameOf(i)).Do(ctx).Error()
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	},
}
