package mirror

import (
	"bytes"
	"maps"

	"go.uber.org/fx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxstore"
)

const (
	// SourceLabel makes a ConfigMap or Secret a source to mirror when set
	// to "true".
	SourceLabel = "fxkube.io/mirror"
	// TargetsAnnotation lists the namespaces a source is mirrored to,
	// comma-separated: "ns-a,ns-b".
	TargetsAnnotation = "fxkube.io/mirror-to"
	// CopyLabel is "true" on every copy mirror makes.
	CopyLabel = "fxkube.io/mirrored"
	// CopyOfAnnotation names the source of a copy as "namespace/name".
	CopyOfAnnotation = "fxkube.io/mirror-of"
)

// The names of Module's controllers, which name them in logs, metrics and as
// the reporting controller of their Events.
const (
	ConfigMapsController = "mirror-configmaps"
	SecretsController    = "mirror-secrets"
)

// Module mirrors ConfigMaps and Secrets; see the package documentation. It
// needs fxstore.Module and fxcontroller.Module (or fxcontrollertest.Module).
var Module = fx.Module("mirror",
	fxcontroller.Provide(newConfigMapController),
	fxcontroller.Provide(newSecretController),
)

type params struct {
	fx.In

	Stores *fxstore.Registry
	Client client.Client
	Events fxcontroller.RecorderProvider
}

func newConfigMapController(p params) (*fxcontroller.Controller, error) {
	return newController(p, configMaps)
}

func newSecretController(p params) (*fxcontroller.Controller, error) {
	return newController(p, secrets)
}

// kind is what mirroring needs to know about one kind of object.
type kind[T client.Object] struct {
	controller string
	name       string // as in messages: "ConfigMap"
	resource   string // in the core group
	newObject  func() T
	// sameContent reports whether a and b have the same content: what a copy
	// shares with its source.
	sameContent func(a, b T) bool
	// copyContent gives dst the content of src.
	copyContent func(dst, src T)
	// updatable reports whether dst can take the content of src by an
	// update; if not, it is deleted and created anew.
	updatable func(dst, src T) bool
}

var configMaps = kind[*corev1.ConfigMap]{
	controller: ConfigMapsController,
	name:       "ConfigMap",
	resource:   "configmaps",
	newObject:  func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
	sameContent: func(a, b *corev1.ConfigMap) bool {
		return maps.Equal(a.Data, b.Data) && maps.EqualFunc(a.BinaryData, b.BinaryData, bytes.Equal)
	},
	copyContent: func(dst, src *corev1.ConfigMap) {
		dst.Data, dst.BinaryData = maps.Clone(src.Data), maps.Clone(src.BinaryData)
	},
	updatable: func(c, _ *corev1.ConfigMap) bool { return !isTrue(c.Immutable) },
}

var secrets = kind[*corev1.Secret]{
	controller: SecretsController,
	name:       "Secret",
	resource:   "secrets",
	newObject:  func() *corev1.Secret { return &corev1.Secret{} },
	sameContent: func(a, b *corev1.Secret) bool {
		return a.Type == b.Type && maps.EqualFunc(a.Data, b.Data, bytes.Equal)
	},
	copyContent: func(dst, src *corev1.Secret) {
		dst.Type, dst.Data = src.Type, maps.Clone(src.Data)
	},
	// The API server refuses to change a Secret's type.
	updatable: func(c, s *corev1.Secret) bool { return !isTrue(c.Immutable) && c.Type == s.Type },
}

func isTrue(b *bool) bool { return b != nil && *b }

// Index names, declared on the shared stores of ConfigMaps and Secrets.
const (
	// copiesIndex finds copies by their source's "namespace/name".
	copiesIndex = "mirror.copies"
	// targetsIndex finds sources by the namespaces they are mirrored to.
	targetsIndex = "mirror.targets"
)

var namespaceKind = corev1.SchemeGroupVersion.WithKind("Namespace")

func newController[T client.Object](p params, k kind[T]) (*fxcontroller.Controller, error) {
	objects, err := fxstore.For[T](p.Stores, fxstore.Spec{},
		fxstore.WithConsumer(k.controller),
		fxstore.WithIndex(copiesIndex, sourceOfCopy[T]),
		fxstore.WithIndex(targetsIndex, targetsOfSource[T]))
	if err != nil {
		return nil, err
	}
	namespaces, err := fxstore.For[*metav1.PartialObjectMetadata](p.Stores, fxstore.Spec{Kind: namespaceKind},
		fxstore.WithConsumer(k.controller))
	if err != nil {
		return nil, err
	}
	r := &reconciler[T]{
		kind:       k,
		objects:    objects,
		namespaces: namespaces,
		client:     p.Client,
		events:     p.Events.GetEventRecorder(k.controller),
	}
	return fxcontroller.New(k.controller, objects, r,
		fxcontroller.WithPredicates(sourcePredicate),
		fxcontroller.Watches(objects, handler.EnqueueRequestsFromMapFunc(r.sourcesOfObject)),
		fxcontroller.Watches(namespaces, handler.EnqueueRequestsFromMapFunc(r.sourcesOfNamespace)),
		fxcontroller.Writes(corev1.Resource(k.resource), "create", "update", "delete"))
}
