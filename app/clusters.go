package app

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/fxkube/fxkube/fxcluster"
)

// Clusters is what the app asks of its member clusters (fxcluster): the
// same of each. describe connects to no cluster, so no member has joined
// then: it shows what every member will be asked. A Graph of a running
// app lists its members too.
type Clusters struct {
	// Stores are asked for in every member cluster. Their keys name the
	// cluster "*"; each member's name the member.
	Stores []Store `json:"stores"`
	// Controllers run in every member cluster.
	Controllers []ClusterController `json:"controllers,omitempty"`
	// Members are the member clusters engaged now.
	Members []Member `json:"members,omitempty"`
}

// ClusterController is a controller across member clusters.
type ClusterController struct {
	Name string `json:"name"`
	// Primary and Secondary are stores in every member, as Clusters'
	// Stores key them.
	Primary   string   `json:"primary"`
	Secondary []string `json:"secondary,omitempty"`
	// OwnCluster are stores in the app's own cluster, as Graph's Stores
	// key them: a change to one enqueues requests in every member.
	OwnCluster []string `json:"ownCluster,omitempty"`
	// Writes are what it writes in each member.
	Writes      []string `json:"writes,omitempty"`
	NeedsLeader bool     `json:"needsLeader"`
}

// Member is a member cluster engaged by a running app.
type Member struct {
	Name string `json:"name"`
	// State is joining, ready, failing, failed or leaving.
	State string    `json:"state"`
	Host  string    `json:"host"`
	Since time.Time `json:"since"`
	// Attempts counts its attempts to join, the current one included.
	Attempts int `json:"attempts"`
	// Error is why its last attempt failed, while it is failed.
	Error  string  `json:"error,omitempty"`
	Stores []Store `json:"stores,omitempty"`
}

// AddClusters adds what f asks of every member cluster, and the members
// f has engaged and those checked, if it asks anything.
func (g *Graph) AddClusters(f *fxcluster.Fleet, checked ...fxcluster.ClusterInfo) {
	if f == nil {
		return
	}
	asked, ctrls, members := f.Stores(), f.Controllers(), append(f.Clusters(), checked...)
	if len(asked) == 0 && len(ctrls) == 0 && len(members) == 0 {
		return
	}
	c := &Clusters{}
	byKey := controllersByKey{} // in cluster "*"
	for _, ctrl := range ctrls {
		info := ctrl.Info()
		gc := ClusterController{Name: info.Name, Primary: info.Primary.String(), NeedsLeader: info.NeedsLeader}
		byKey.add(info.Primary, info.Name)
		for _, k := range info.Secondary {
			gc.Secondary = append(gc.Secondary, k.String())
			byKey.add(k, info.Name)
		}
		for _, k := range info.OwnCluster {
			gc.OwnCluster = append(gc.OwnCluster, k.String())
			g.addController(k.String(), info.Name)
		}
		for _, w := range info.Writes {
			gc.Writes = append(gc.Writes, w.String())
		}
		c.Controllers = append(c.Controllers, gc)
	}
	for _, s := range asked {
		c.Stores = append(c.Stores, newStore(s, byKey[s.Key]))
	}
	for _, m := range members {
		gm := Member{Name: string(m.Name), State: string(m.State), Host: m.Host, Since: m.Since, Attempts: m.Attempts}
		if m.Err != nil {
			gm.Error = m.Err.Error()
		}
		for _, s := range m.Stores {
			every := s.Key
			every.Cluster = "*"
			gm.Stores = append(gm.Stores, newStore(s, byKey[every]))
		}
		c.Members = append(c.Members, gm)
	}
	g.Clusters = c
}

// addController names controller among the users of the app's own store
// key.
func (g *Graph) addController(key, controller string) {
	for i := range g.Stores {
		if s := &g.Stores[i]; s.Key == key && !slices.Contains(s.Controllers, controller) {
			s.Controllers = append(s.Controllers, controller)
		}
	}
}

// writeText prints what every member is asked, and the members, for
// people.
func (c *Clusters) writeText(w io.Writer) {
	fmt.Fprintln(w, "\nIn every member cluster:\n  Stores:")
	for _, s := range c.Stores {
		writeStoreText(w, "    ", s)
	}
	fmt.Fprintln(w, "  Controllers:")
	for _, ctrl := range c.Controllers {
		fmt.Fprintf(w, "    %s\n      primary: %s\n", ctrl.Name, ctrl.Primary)
		for _, s := range ctrl.Secondary {
			fmt.Fprintf(w, "      watches: %s\n", s)
		}
		for _, s := range ctrl.OwnCluster {
			fmt.Fprintf(w, "      watches in the app's own cluster: %s\n", s)
		}
		for _, wr := range ctrl.Writes {
			fmt.Fprintf(w, "      writes:  %s\n", wr)
		}
	}
	if len(c.Members) == 0 {
		fmt.Fprintln(w, "\nMember clusters: none engaged (describe --cluster checks those --cluster-kubeconfig names)")
		return
	}
	fmt.Fprintln(w, "\nMember clusters:")
	for _, m := range c.Members {
		attempts := "attempt"
		if m.Attempts != 1 {
			attempts += "s"
		}
		fmt.Fprintf(w, "  %s (%s): %s since %s, %d %s\n", m.Name, m.Host, m.State, m.Since.UTC().Format(time.RFC3339), m.Attempts, attempts)
		if m.Error != "" {
			fmt.Fprintf(w, "    error: %s\n", strings.ReplaceAll(m.Error, "\n", "\n      "))
		}
		for _, s := range m.Stores {
			writeStoreText(w, "    ", s)
		}
	}
}
