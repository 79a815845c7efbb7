package controlplane

import (
	"maps"

	cliflag "k8s.io/component-base/cli/flag"
)

// An Option configures the control plane that Start starts.
type Option func(*options)

type options struct {
	featureGates map[string]bool
}

// WithFeatureGates sets kube-apiserver's feature gates, as its
// --feature-gates flag does: true enables a gate, false disables it, and a
// gate not named keeps its default. Later options add to earlier ones and win
// for a gate both name. Replicas (see [Running.StartReplica]) run with the
// same gates, as the kube-apiservers of one cluster do.
//
// kube-apiserver refuses to start with a gate it does not know, or one locked
// to its default; Start's error then names the gates.
func WithFeatureGates(gates map[string]bool) Option {
	gates = maps.Clone(gates)
	return func(o *options) {
		if o.featureGates == nil {
			o.featureGates = make(map[string]bool, len(gates))
		}
		maps.Copy(o.featureGates, gates)
	}
}

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// featureGatesFlag returns the value of --feature-gates, gates sorted by
// name, or "" when no gate is set.
func (o options) featureGatesFlag() string {
	return cliflag.NewMapStringBool(&o.featureGates).String()
}
