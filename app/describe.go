package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
)

// Graph is what the app's modules declared: its stores and controllers. The
// describe command prints it; `describe --output json` prints it as JSON.
type Graph struct {
	// Requests counts the store requests of all modules; Specs the
	// distinct stores serving them; Informers those with an informer of
	// their own, the others being views of a broader store.
	Requests    int          `json:"requests"`
	Specs       int          `json:"specs"`
	Informers   int          `json:"informers"`
	Stores      []Store      `json:"stores"`
	Controllers []Controller `json:"controllers"`
	// Hosted are the controller-runtime operators hosted with
	// fxcontroller.SetupWithManager. Their stores name them as consumers.
	Hosted []Hosted `json:"hosted,omitempty"`
	// Sharding describes the sharded stores (fxshard), when there are any.
	Sharding *Sharding `json:"sharding,omitempty"`
}

// Sharding is the sharded stores of the Graph and their Leases.
type Sharding struct {
	// Group is the Leases' "namespace/name": a Lease per bucket,
	// name-bucket-<i>, and one per replica, name-member-<identity>.
	Group   string `json:"group,omitempty"`
	Buckets int    `json:"buckets,omitempty"`
	// Error is why the app cannot shard as its flags say.
	Error  string         `json:"error,omitempty"`
	Stores []ShardedStore `json:"stores"`
}

// ShardedStore is one sharded store of the Graph: a store per bucket held,
// each of the objects of Key whose ShardKey hashes into the bucket.
type ShardedStore struct {
	Key         string   `json:"key"`
	ShardKey    string   `json:"shardKey"`
	Controllers []string `json:"controllers,omitempty"`
}

// Hosted is one hosted operator of the Graph.
type Hosted struct {
	Name        string   `json:"name"`
	DeclaredBy  string   `json:"declaredBy"`
	Controllers []string `json:"controllers,omitempty"`
	Writes      []string `json:"writes,omitempty"`
}

// Store is one store of the Graph.
type Store struct {
	Key           string   `json:"key"`
	Group         string   `json:"group"`
	Version       string   `json:"version"`
	Kind          string   `json:"kind"`
	Namespace     string   `json:"namespace,omitempty"`
	LabelSelector string   `json:"labelSelector,omitempty"`
	FieldSelector string   `json:"fieldSelector,omitempty"`
	Projection    string   `json:"projection"`
	Transform     string   `json:"transform"`
	Consumers     []string `json:"consumers"`
	Controllers   []string `json:"controllers,omitempty"`
	Indexes       []string `json:"indexes,omitempty"`
	// Late reports a store started after every other had synced, when a
	// hosted operator first read its kind.
	Late bool `json:"late,omitempty"`
	// ViewOf is the key of the store this one is a view of, served from
	// its informer with no watch or copy of its own.
	ViewOf string `json:"viewOf,omitempty"`
}

// Controller is one controller of the Graph.
type Controller struct {
	Name        string   `json:"name"`
	DeclaredBy  string   `json:"declaredBy"`
	Primary     string   `json:"primary"`
	Secondary   []string `json:"secondary,omitempty"`
	Writes      []string `json:"writes,omitempty"`
	NeedsLeader bool     `json:"needsLeader"`
}

// unconnected is the API server the graph is built with when no cluster is
// needed: building the graph does no I/O, so nothing ever connects to it.
var unconnected = &rest.Config{Host: "https://unconnected.invalid"}

// graphOf builds the app's fx graph without starting it and returns what the
// modules declared.
func (a *app) graphOf() (*fxstore.Registry, fxcontroller.Controllers, fxcontroller.HostedOperators, *fxshard.Shards, error) {
	var (
		reg    *fxstore.Registry
		ctrls  fxcontroller.Controllers
		hosted fxcontroller.HostedOperators
		shards *fxshard.Shards
	)
	fxApp := fx.New(fx.NopLogger, a.graph(unconnected, zap.NewNop()), fx.Populate(&reg, &ctrls, &hosted, &shards))
	if err := fxApp.Err(); err != nil {
		return nil, nil, nil, nil, err
	}
	for _, h := range hosted {
		if err := h.Declare(context.Background()); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	return reg, ctrls, hosted, shards, nil
}

// describe returns the app's Graph.
func (a *app) describe() (Graph, error) {
	reg, ctrls, hosted, shards, err := a.graphOf()
	if err != nil {
		return Graph{}, err
	}
	g := NewGraph(reg, ctrls, hosted)
	g.addSharding(shards.Info(), ctrls)
	return g, nil
}

// NewGraph describes an app from its registry, controllers and hosted
// operators: as declared when the app is built, or as it runs, with the
// stores started late since.
func NewGraph(reg *fxstore.Registry, ctrls fxcontroller.Controllers, hosted fxcontroller.HostedOperators) Graph {
	g := Graph{Requests: reg.Requests()}
	byKey := map[fxstore.Key][]string{}
	uses := func(k fxstore.Key, controller string) {
		if !slices.Contains(byKey[k], controller) {
			byKey[k] = append(byKey[k], controller)
		}
	}
	for _, c := range ctrls {
		info := c.Info()
		gc := Controller{Name: info.Name, DeclaredBy: info.DeclaredBy, Primary: info.Primary.String(), NeedsLeader: info.NeedsLeader}
		uses(info.Primary, info.Name)
		for _, k := range info.Secondary {
			gc.Secondary = append(gc.Secondary, k.String())
			uses(k, info.Name)
		}
		for _, w := range info.Writes {
			gc.Writes = append(gc.Writes, w.String())
		}
		g.Controllers = append(g.Controllers, gc)
	}
	for _, s := range reg.Stores() {
		k := s.Key
		viewOf := ""
		if s.ViewOf != nil {
			viewOf = s.ViewOf.String()
		} else {
			g.Informers++
		}
		g.Stores = append(g.Stores, Store{
			ViewOf: viewOf,
			Key:    k.String(), Group: k.Kind.Group, Version: k.Kind.Version, Kind: k.Kind.Kind,
			Namespace: k.Namespace, LabelSelector: k.LabelSelector, FieldSelector: k.FieldSelector,
			Projection: k.Projection.String(), Transform: k.Transform,
			Consumers: s.Consumers, Controllers: byKey[k], Indexes: s.Indexes, Late: s.Late,
		})
	}
	g.Specs = len(g.Stores)
	for _, h := range hosted {
		info := h.Info()
		gh := Hosted{Name: info.Name, DeclaredBy: info.DeclaredBy, Controllers: h.Controllers()}
		for _, w := range info.Writes {
			gh.Writes = append(gh.Writes, w.String())
		}
		g.Hosted = append(g.Hosted, gh)
	}
	return g
}

// addSharding describes the app's sharded stores, if it has any.
func (g *Graph) addSharding(info fxshard.Info, ctrls fxcontroller.Controllers) {
	if len(info.Stores) == 0 {
		return
	}
	sh := &Sharding{Group: info.Group, Buckets: info.Buckets}
	if info.Err != nil {
		sh.Error = info.Err.Error()
	}
	for _, st := range info.Stores {
		gs := ShardedStore{Key: st.Key.String(), ShardKey: st.ShardKey}
		for _, c := range ctrls {
			if c.Info().Primary == st.Key {
				gs.Controllers = append(gs.Controllers, c.Name())
			}
		}
		sh.Stores = append(sh.Stores, gs)
	}
	g.Sharding = sh
}

func (a *app) describeCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Print the stores and controllers the modules declare, without contacting a cluster",
		Long: `Print the stores and controllers the modules declare, without contacting a cluster.

--output json prints a Graph object:
  {"requests": N, "specs": M, "informers": K,
   "stores": [{"key", "group", "version", "kind", "namespace", "labelSelector",
               "fieldSelector", "projection", "transform", "consumers": [...],
               "controllers": [...], "indexes": [...], "late", "viewOf"}],
   "controllers": [{"name", "declaredBy", "primary", "secondary": [...],
                    "writes": [...], "needsLeader"}],
   "hosted": [{"name", "declaredBy", "controllers": [...], "writes": [...]}],
   "sharding": {"group", "buckets", "error",
                "stores": [{"key", "shardKey", "controllers": [...]}]}}
Store keys in "primary" and "secondary" match a store's "key".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g, err := a.describe()
			if err != nil {
				return err
			}
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(g)
			case "text", "":
				g.WriteText(cmd.OutOrStdout())
				return nil
			}
			return fmt.Errorf("unknown --output %q; use text or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// WriteText prints the graph for people.
func (g Graph) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%d store requests → %d specs → %d informers\n\nStores:\n", g.Requests, g.Specs, g.Informers)
	for _, s := range g.Stores {
		if s.ViewOf != "" {
			fmt.Fprintf(w, "  %s → view of %s\n", s.Key, s.ViewOf)
		} else {
			fmt.Fprintf(w, "  %s\n", s.Key)
		}
		if s.Late {
			fmt.Fprintln(w, "    started late, on first read")
		}
		fmt.Fprintf(w, "    consumers: %s\n", strings.Join(s.Consumers, ", "))
		if len(s.Controllers) > 0 {
			fmt.Fprintf(w, "    controllers: %s\n", strings.Join(s.Controllers, ", "))
		}
		if len(s.Indexes) > 0 {
			fmt.Fprintf(w, "    indexes: %s\n", strings.Join(s.Indexes, ", "))
		}
	}
	fmt.Fprintln(w, "\nControllers:")
	for _, c := range g.Controllers {
		fmt.Fprintf(w, "  %s (declared by %s)\n    primary: %s\n", c.Name, c.DeclaredBy, c.Primary)
		for _, s := range c.Secondary {
			fmt.Fprintf(w, "    watches: %s\n", s)
		}
		for _, wr := range c.Writes {
			fmt.Fprintf(w, "    writes:  %s\n", wr)
		}
	}
	if sh := g.Sharding; sh != nil {
		if sh.Error != "" {
			fmt.Fprintf(w, "\nSharded stores (cannot shard: %s):\n", sh.Error)
		} else {
			fmt.Fprintf(w, "\nSharded stores (%d buckets, Leases %s-bucket-<i>; a store per bucket held):\n", sh.Buckets, sh.Group)
		}
		for _, s := range sh.Stores {
			fmt.Fprintf(w, "  %s sharded by %s\n", s.Key, s.ShardKey)
			if len(s.Controllers) > 0 {
				fmt.Fprintf(w, "    controllers: %s\n", strings.Join(s.Controllers, ", "))
			}
		}
	}
	if len(g.Hosted) > 0 {
		fmt.Fprintln(w, "\nHosted controller-runtime operators (their stores name them as consumers):")
		for _, h := range g.Hosted {
			fmt.Fprintf(w, "  %s (set up by %s)\n", h.Name, h.DeclaredBy)
			if len(h.Controllers) > 0 {
				fmt.Fprintf(w, "    controllers: %s\n", strings.Join(h.Controllers, ", "))
			}
			for _, wr := range h.Writes {
				fmt.Fprintf(w, "    writes:  %s\n", wr)
			}
		}
	}
}
