package fxcluster

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/writes"
)

// Writes declares that the controller's reconciler writes resource, with
// verbs, in each member cluster, as fxcontroller.Writes does in the app's
// own: for example Writes(corev1.Resource("configmaps"), "create",
// "update", "delete"). The app's rbac command grants it in every member.
func Writes(resource schema.GroupResource, verbs ...string) ControllerOption {
	return controllerOption(func(o *controllerOptions) {
		sorted, errs := writes.Check(resource, verbs)
		if len(errs) > 0 {
			o.errs = append(o.errs, errs...)
			return
		}
		o.writes = append(o.writes, Write{Resource: resource, Verbs: sorted})
	})
}

// Write is a kind of change a controller makes, as fxcontroller.Write,
// which is the same type.
type Write = writes.Write

// ControllerInfo describes a controller across member clusters: what it
// reads and writes in each member, and what it watches in the app's own
// cluster.
type ControllerInfo struct {
	Name string
	// Primary is the store whose objects it reconciles, keyed in cluster
	// "*": every member has it.
	Primary fxstore.Key
	// Secondary are the stores of its Watches options, in every member,
	// in order.
	Secondary []fxstore.Key
	// OwnCluster are the stores of its WatchesOwnCluster options, in the
	// app's own cluster, in order.
	OwnCluster []fxstore.Key
	// Writes are what it declared with Writes, in each member, in order.
	Writes []Write
	// NeedsLeader reports whether it runs only on the leader.
	NeedsLeader bool
}

// Info describes the controller.
func (c *Controller) Info() ControllerInfo {
	info := ControllerInfo{Name: c.name, Primary: c.primary.Key(), Writes: slices.Clone(c.writes), NeedsLeader: c.NeedLeaderElection()}
	for _, w := range c.watches {
		if w.members != nil {
			info.Secondary = append(info.Secondary, w.members.Key())
		} else {
			info.OwnCluster = append(info.OwnCluster, w.own.Key())
		}
	}
	return info
}

// Controllers returns the controllers declared in the fleet with
// NewController, in the order they were: each member that joins engages
// them all.
func (f *Fleet) Controllers() []*Controller {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ctrls []*Controller
	for _, d := range f.declared {
		if c, ok := d.(*Controller); ok {
			ctrls = append(ctrls, c)
		}
	}
	return ctrls
}
