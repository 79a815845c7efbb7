package fxstore

import (
	"fmt"

	"go.uber.org/fx"
	"go.uber.org/zap"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Module provides the app's *Registry and the *runtime.Scheme it resolves Go
// types with: client-go's built-in types plus every AddToScheme registered
// with AddToScheme. It needs a *zap.Logger.
var Module = fx.Module("fxstore",
	fx.Provide(newScheme, newRegistry),
)

// schemeGroup is the fx value group of functions that add types to the app's
// scheme.
const schemeGroup = "fxkube.scheme"

// AddToScheme adds Go types, such as a CRD's, to the app's scheme so stores
// of them can be requested. Pass the AddToScheme function generated for the
// API package.
func AddToScheme(fns ...func(*k8sruntime.Scheme) error) fx.Option {
	opts := make([]fx.Option, len(fns))
	for i, fn := range fns {
		opts[i] = fx.Supply(fx.Annotated{Group: schemeGroup, Target: fn})
	}
	return fx.Options(opts...)
}

// schemeParams are what the app's scheme is built from.
type schemeParams struct {
	fx.In

	AddToScheme []func(*k8sruntime.Scheme) error `group:"fxkube.scheme"`
}

func newScheme(p schemeParams) (*k8sruntime.Scheme, error) { return NewScheme(p.AddToScheme...) }

// NewScheme returns a scheme with client-go's built-in types and the types
// each addToScheme adds, as the app's is built from AddToScheme.
func NewScheme(addToScheme ...func(*k8sruntime.Scheme) error) (*k8sruntime.Scheme, error) {
	scheme := k8sruntime.NewScheme()
	for _, add := range append([]func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme}, addToScheme...) {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return scheme, nil
}

// registryParams are what the app's registry is built from.
type registryParams struct {
	fx.In

	Scheme *k8sruntime.Scheme
	Logger *zap.Logger `optional:"true"`
}

func newRegistry(p registryParams) *Registry {
	var opts []RegistryOption
	if p.Logger != nil {
		opts = append(opts, WithLogger(p.Logger.Named("fxstore")))
	}
	return NewRegistry(p.Scheme, opts...)
}
