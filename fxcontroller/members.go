package fxcontroller

import (
	"fmt"

	"go.uber.org/fx"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/fxkube/fxkube/fxcluster"
)

// InEveryMemberCluster hosts the operator (SetupWithManager) in every
// member cluster of the app's fxcluster.Fleet, not in the app's own: its
// setup runs once for each member that joins, against a manager of that
// member. Its caches are the member's stores, merged with every other
// module's there; its client writes to the member; its controllers run
// once the member has joined, and stop as it leaves. The app needs
// fxcluster.Module.
//
// What a member's operator cannot do yet: serve webhooks, and add caches
// or clusters of its own (mgr.Add); its setup fails, naming the member.
func InEveryMemberCluster() HostedOption {
	return newOption(func(o *options) {
		o.inEveryMember = true
		o.sets("where it runs", "fxcontroller.InEveryMemberCluster()")
	}, "fxcontroller.InEveryMemberCluster()")
}

// hostInEveryMember hosts the operator in each member of fleet as it
// joins.
func hostInEveryMember(p hostParams, fleet *fxcluster.Fleet, setupName string, setup func(manager.Manager) error, o options) error {
	if !p.Selection.Enabled(o.name) {
		return nil
	}
	return fleet.InEveryMember("hosted operator "+o.name, func(c *fxcluster.Cluster) ([]manager.Runnable, error) {
		mp := p
		mp.Registry, mp.Connection, mp.Recorders, mp.Webhooks = c.Stores(), c.Connection(), c, nil
		res, err := host(mp, setupName, setup, o)
		if err != nil {
			return nil, err
		}
		for _, rn := range res.Runnables {
			if _, ok := rn.(hasCache); ok {
				return nil, fmt.Errorf("hosted operator %q adds %T to its manager: in a member cluster, read through mgr.GetCache() instead", o.name, rn)
			}
		}
		return res.Runnables, nil
	})
}

// hasCache is a runnable with a cache of its own, as lifecycle groups
// them.
type hasCache interface{ GetCache() crcache.Cache }

// inEveryMember is SetupWithManager's fx option for InEveryMemberCluster.
func inEveryMember(setupName string, setup func(manager.Manager) error, o options) fx.Option {
	return fx.Invoke(func(p hostParams, fleet *fxcluster.Fleet) error {
		return hostInEveryMember(p, fleet, setupName, setup, o)
	})
}
