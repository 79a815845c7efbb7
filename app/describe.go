package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/fx"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/connection"
	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/builderr"
	"github.com/fxkube/fxkube/internal/listwatch"
	"github.com/fxkube/fxkube/lifecycle"
)

// Graph is what the app's modules declared: its stores and controllers. The
// describe command prints it; `describe --output json` prints it as JSON,
// and `--output mermaid` draws it.
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
	// Webhooks are the paths the app's webhook server serves.
	Webhooks []Webhook `json:"webhooks,omitempty"`
	// Sharding describes the sharded stores (fxshard), when there are any.
	Sharding *Sharding `json:"sharding,omitempty"`
	// Clusters is what the app asks of every member cluster (fxcluster),
	// when it asks anything.
	Clusters *Clusters `json:"clusters,omitempty"`
}

// Webhook is one path of the app's webhook server.
type Webhook struct {
	Path string `json:"path"`
	// Type is mutating, validating, conversion, admission (another
	// admission webhook) or http (a plain handler).
	Type string `json:"type"`
	// Kind is the kind a mutating or validating webhook admits, as its
	// path (controller-runtime's builder's) names it; "" when the path
	// names none of the scheme's kinds.
	Kind string `json:"kind,omitempty"`
	// ServedBy are the hosted operators whose handlers serve the path, in
	// the order they run; "(modules)" stands for the app's own modules.
	ServedBy []string `json:"servedBy"`
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
	// Live is the group in the cluster now, with describe --cluster.
	Live *LiveSharding `json:"live,omitempty"`
}

// LiveSharding is a sharding group as its Leases say, and how many objects
// of the sharded stores each bucket has: what each replica holds.
type LiveSharding struct {
	// Handovers counts the times a bucket changed hands (the bucket
	// Leases' leaseTransitions).
	Handovers int          `json:"handovers"`
	Members   []LiveMember `json:"members"`
	Buckets   []LiveBucket `json:"buckets"`
}

// LiveMember is one replica of the group.
type LiveMember struct {
	Identity string `json:"identity"`
	Buckets  []int  `json:"buckets"`
	Objects  int    `json:"objects"`
	// Expired reports that the replica has no live member Lease: it has
	// stopped, or is stopping.
	Expired bool `json:"expired,omitempty"`
}

// LiveBucket is one bucket of the group.
type LiveBucket struct {
	Bucket int `json:"bucket"`
	// Holder is the replica holding the bucket, "" for none.
	Holder      string    `json:"holder"`
	Objects     int       `json:"objects"`
	Transitions int32     `json:"transitions"`
	Renewed     time.Time `json:"renewed,omitzero"`
	// Expired reports that the holder has not renewed it for its
	// LeaseDuration: another replica may take it.
	Expired bool `json:"expired,omitempty"`
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
	// WaitingForKind reports, for a running app, a store that waits for
	// its kind to be served, not started (see fxcontroller.WhenServed).
	WaitingForKind bool `json:"waitingForKind,omitempty"`
	// ControllersDisabled reports, for a running app, a store not started
	// (WaitingForKind) whose controllers are all disabled
	// (fxcontroller.Switch): it stopped when they did.
	ControllersDisabled bool `json:"controllersDisabled,omitempty"`
	// Failing says, for a running app, since when and why the store's
	// list/watch fails (see fxstore.FailingError).
	Failing string `json:"failing,omitempty"`
	// Objects and Bytes are, for a running app, what the store holds and
	// an estimate of the heap it takes (see fxstore.StoreInfo).
	Objects int   `json:"objects,omitempty"`
	Bytes   int64 `json:"bytes,omitempty"`
}

// Controller is one controller of the Graph.
type Controller struct {
	Name        string   `json:"name"`
	DeclaredBy  string   `json:"declaredBy"`
	Primary     string   `json:"primary"`
	Secondary   []string `json:"secondary,omitempty"`
	Writes      []string `json:"writes,omitempty"`
	NeedsLeader bool     `json:"needsLeader"`
	// WhenServed reports a controller that waits for its kinds to be
	// served (fxcontroller.WhenServed).
	WhenServed bool `json:"whenServed,omitempty"`
	// State is, for a running app, what the controller does, such as
	// "running" or "waiting for kind Widget.example.com/v1 to be served".
	State string `json:"state,omitempty"`
}

// unconnected is the API server the graph is built with when no cluster is
// needed: building the graph does no I/O, so nothing ever connects to it.
var unconnected = &rest.Config{Host: "https://unconnected.invalid"}

// declared is what an app's modules declared, as built and not started.
type declared struct {
	reg      *fxstore.Registry
	ctrls    fxcontroller.Controllers
	hosted   fxcontroller.HostedOperators
	shards   *fxshard.Shards
	webhooks *lifecycle.Webhooks
	fleet    *fxcluster.Fleet
}

// graphOf builds the app's fx graph without starting it and returns what the
// modules declared.
func (a *app) graphOf() (declared, error) {
	var d declared
	// With the lifecycle, whose webhook server hosted operators register
	// on; nothing of it runs.
	fxApp := fx.New(a.graph(unconnected, zap.NewNop()), lifecycle.Options(a.flags.lifecycle), fx.NopLogger,
		fx.Populate(&d.reg, &d.ctrls, &d.hosted, &d.shards, &d.webhooks, &d.fleet))
	if err := fxApp.Err(); err != nil {
		return declared{}, builderr.Readable(err)
	}
	for _, h := range d.hosted {
		if err := h.Declare(context.Background()); err != nil {
			return declared{}, err
		}
	}
	return d, nil
}

// describe returns the app's Graph; with cluster, its sharding group as
// the cluster of --kubeconfig has it now.
func (a *app) describe(ctx context.Context, cluster bool) (Graph, error) {
	// The Leases are where run would put them.
	a.defaultLeaseNamespaces(zap.NewNop(), true)
	d, err := a.graphOf()
	if err != nil {
		return Graph{}, err
	}
	g := NewGraph(d.reg, d.ctrls, d.hosted)
	g.AddWebhooks(d.webhooks, d.reg.Scheme())
	var checked []fxcluster.ClusterInfo
	if cluster {
		checked = a.checkMembers(ctx, d.fleet)
	}
	g.AddClusters(d.fleet, checked...)
	info := d.shards.Info()
	g.addSharding(info, d.ctrls)
	if cluster && g.Sharding != nil {
		if g.Sharding.Live, err = a.liveSharding(ctx, info, d.reg.Scheme()); err != nil {
			return Graph{}, err
		}
	}
	return g, nil
}

// checkMembers checks each member cluster --cluster-kubeconfig names, as
// it would join: see fxcluster.Fleet.Check.
func (a *app) checkMembers(ctx context.Context, f *fxcluster.Fleet) []fxcluster.ClusterInfo {
	infos := make([]fxcluster.ClusterInfo, len(a.flags.clusterFiles))
	var wg sync.WaitGroup
	for i, file := range a.flags.clusterFiles {
		wg.Go(func() {
			cfg, err := file.Load()
			if err != nil {
				infos[i] = fxcluster.ClusterInfo{Name: file.Name, State: fxcluster.Failed, Since: time.Now(), Attempts: 1, Err: err}
				return
			}
			infos[i] = f.Check(ctx, file.Name, cfg)
		})
	}
	wg.Wait()
	return infos
}

// liveSharding reads the sharding group's Leases from the cluster of
// --kubeconfig, and lists the metadata of the sharded stores' objects to
// count each bucket's.
func (a *app) liveSharding(ctx context.Context, info fxshard.Info, scheme *k8sruntime.Scheme) (*LiveSharding, error) {
	if info.Err != nil {
		return nil, fmt.Errorf("describe the sharding group: %w", info.Err)
	}
	cfg, err := loadConfig()
	if err != nil {
		return nil, err
	}
	conn, err := connection.New(cfg, scheme)
	if err != nil {
		return nil, err
	}
	defer conn.HTTPClient.CloseIdleConnections()
	kube, err := kubernetes.NewForConfigAndClient(cfg, conn.HTTPClient)
	if err != nil {
		return nil, err
	}
	namespace, name, _ := strings.Cut(info.Group, "/")
	group, err := fxshard.ReadGroup(ctx, kube, fxshard.Config{Namespace: namespace, Name: name, Buckets: info.Buckets})
	if err != nil {
		return nil, err
	}
	buckets, err := fxshard.NewBuckets(info.Buckets)
	if err != nil {
		return nil, err
	}
	objects := make([]int, info.Buckets)
	type sharded struct {
		key      fxstore.Key
		shardKey string
	}
	counted := map[sharded]bool{} // two stores of one spec hold the same objects
	for _, st := range info.Stores {
		if counted[sharded{st.Key, st.ShardKey}] {
			continue
		}
		counted[sharded{st.Key, st.ShardKey}] = true
		if err := countByBucket(ctx, conn.Client, st, buckets, objects); err != nil {
			return nil, err
		}
	}
	live := &LiveSharding{Handovers: group.Handovers()}
	for _, b := range group.Buckets {
		live.Buckets = append(live.Buckets, LiveBucket{
			Bucket: b.Bucket, Holder: b.Holder, Objects: objects[b.Bucket],
			Transitions: b.Transitions, Renewed: b.Renewed, Expired: b.Expired,
		})
	}
	for _, m := range group.Members {
		lm := LiveMember{Identity: m.Identity, Buckets: m.Buckets, Expired: m.Expired}
		for _, b := range m.Buckets {
			lm.Objects += objects[b]
		}
		live.Members = append(live.Members, lm)
	}
	return live, nil
}

// countByBucket adds to objects, by bucket, the objects st selects, listed
// as metadata in pages.
func countByBucket(ctx context.Context, c client.WithWatch, st fxshard.StoreInfo, buckets fxshard.Buckets, objects []int) error {
	key := st.Key
	key.Projection, key.Shard = fxstore.Metadata, ""
	lw, err := listwatch.New(c, key)
	if err != nil {
		return fmt.Errorf("sharded store %s: %w", st.Key, err)
	}
	list := cache.ToListerWatcherWithContext(lw).ListWithContext
	err = pager.New(list).EachListItem(ctx, metav1.ListOptions{}, func(o k8sruntime.Object) error {
		b, err := buckets.Of(o, st.ShardKey)
		if err != nil {
			return err
		}
		objects[b]++
		return nil
	})
	if err != nil {
		return fmt.Errorf("count the objects of sharded store %s: %w", st.Key, err)
	}
	return nil
}

// NewGraph describes an app from its registry, controllers and hosted
// operators: as declared when the app is built, or as it runs, with the
// stores started late since.
func NewGraph(reg *fxstore.Registry, ctrls fxcontroller.Controllers, hosted fxcontroller.HostedOperators) Graph {
	var g Graph
	byKey := controllersByKey{}
	disabled := map[string]bool{}
	for _, c := range ctrls {
		info := c.Info()
		disabled[info.Name] = c.Status().State == fxcontroller.Disabled
		gc := Controller{Name: info.Name, DeclaredBy: info.DeclaredBy, Primary: info.Primary.String(), NeedsLeader: info.NeedsLeader, WhenServed: info.WhenServed}
		if st := c.Status(); st.State != fxcontroller.NotStarted {
			gc.State = st.String()
		}
		byKey.add(info.Primary, info.Name)
		for _, k := range info.Secondary {
			gc.Secondary = append(gc.Secondary, k.String())
			byKey.add(k, info.Name)
		}
		for _, w := range info.Writes {
			gc.Writes = append(gc.Writes, w.String())
		}
		g.Controllers = append(g.Controllers, gc)
	}
	for _, s := range reg.Stores() {
		g.Requests += len(s.Consumers) // one per request
		if s.ViewOf == nil {
			g.Informers++
		}
		st := newStore(s, byKey[s.Key])
		st.ControllersDisabled = s.Status.WaitingForKind && len(byKey[s.Key]) > 0 && allOf(byKey[s.Key], disabled)
		g.Stores = append(g.Stores, st)
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

// controllersByKey names the controllers that use each store, by key.
type controllersByKey map[fxstore.Key][]string

func (m controllersByKey) add(k fxstore.Key, controller string) {
	if !slices.Contains(m[k], controller) {
		m[k] = append(m[k], controller)
	}
}

// newStore describes the store s, which controllers use.
func newStore(s fxstore.StoreInfo, controllers []string) Store {
	k := s.Key
	viewOf := ""
	if s.ViewOf != nil {
		viewOf = s.ViewOf.String()
	}
	failing := ""
	if since := s.Status.FailingSince; !since.IsZero() {
		failing = (&fxstore.FailingError{Since: since, Err: s.Status.LastError}).Error()
	}
	return Store{
		ViewOf: viewOf, Failing: failing, Objects: s.Objects, Bytes: s.Bytes,
		Key: k.String(), Group: k.Kind.Group, Version: k.Kind.Version, Kind: k.Kind.Kind,
		Namespace: k.Namespace, LabelSelector: k.LabelSelector, FieldSelector: k.FieldSelector,
		Projection: k.Projection.String(), Transform: k.Transform,
		Consumers: s.Consumers, Controllers: controllers, Indexes: s.Indexes, Late: s.Late,
		WaitingForKind: s.Status.WaitingForKind,
	}
}

// allOf reports whether every name of names is set in set.
func allOf(names []string, set map[string]bool) bool {
	for _, name := range names {
		if !set[name] {
			return false
		}
	}
	return true
}

// AddWebhooks adds the paths w serves, with the kinds scheme has that
// their paths name.
func (g *Graph) AddWebhooks(w *lifecycle.Webhooks, scheme *k8sruntime.Scheme) {
	if w == nil {
		return
	}
	kinds := map[string]string{} // by the builder's paths
	for gvk := range scheme.AllKnownTypes() {
		name := gvk.Kind + "/" + gvk.Version
		if gvk.Group != "" {
			name = gvk.Kind + "." + gvk.Group + "/" + gvk.Version
		}
		// As controller-runtime's builder names a kind's webhook paths.
		suffix := "-" + strings.ReplaceAll(gvk.Group, ".", "-") + "-" + gvk.Version + "-" + strings.ToLower(gvk.Kind)
		kinds["/mutate"+suffix], kinds["/validate"+suffix] = name, name
	}
	for _, info := range w.Served() {
		gw := Webhook{Path: info.Path, Type: info.Type, Kind: kinds[info.Path]}
		for _, op := range info.Operators {
			if op == "" {
				op = "(modules)"
			}
			gw.ServedBy = append(gw.ServedBy, op)
		}
		g.Webhooks = append(g.Webhooks, gw)
	}
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
	var (
		output  string
		cluster bool
	)
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Print the stores and controllers the modules declare, without contacting a cluster (unless --cluster)",
		Long: `Print the stores and controllers the modules declare, without contacting a cluster.
With --cluster, also read the sharding group from the cluster of --kubeconfig
(its Leases, and the metadata of the sharded stores' objects), and check
each member cluster --cluster-kubeconfig names as it would join: each store
asked for in every member is served there and may be listed and watched.

--output json prints a Graph object:
  {"requests": N, "specs": M, "informers": K,
   "stores": [{"key", "group", "version", "kind", "namespace", "labelSelector",
               "fieldSelector", "projection", "transform", "consumers": [...],
               "controllers": [...], "indexes": [...], "late", "viewOf"}],
   "controllers": [{"name", "declaredBy", "primary", "secondary": [...],
                    "writes": [...], "needsLeader", "whenServed"}],
   "hosted": [{"name", "declaredBy", "controllers": [...], "writes": [...]}],
   "webhooks": [{"path", "type", "kind", "servedBy": [...]}],
   "sharding": {"group", "buckets", "error",
                "stores": [{"key", "shardKey", "controllers": [...]}],
                "live": {"handovers", "members": [{"identity", "buckets": [...], "objects", "expired"}],
                         "buckets": [{"bucket", "holder", "objects", "transitions", "renewed", "expired"}]}},
   "clusters": {"stores": [<store>, ...],
                "controllers": [{"name", "primary", "secondary": [...], "ownCluster": [...],
                                 "writes": [...], "needsLeader"}],
                "members": [{"name", "state", "host", "since", "attempts", "error", "stores": [...]}]}}
Store keys in "primary" and "secondary" match a store's "key". "clusters" is
what the app asks of every member cluster (fxcluster), its stores keyed in
cluster "*"; its members are those --cluster checked, ready or failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			g, err := a.describe(cmd.Context(), cluster)
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
			case "mermaid":
				g.writeMermaid(cmd.OutOrStdout())
				return nil
			}
			return fmt.Errorf("unknown --output %q; use text, json or mermaid", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json, or mermaid (a flowchart of stores, views, consumers and controllers, which GitHub renders in Markdown)")
	cmd.Flags().BoolVar(&cluster, "cluster", false, "also read the sharding group from the cluster of --kubeconfig: which replica holds each bucket, how many objects of the sharded stores each bucket and replica has, and the handovers; and check each member cluster of --cluster-kubeconfig")
	return cmd
}

// heapText says how much heap a store's objects take.
func heapText(bytes int64, view bool) string {
	if view {
		return "in its parent's heap"
	}
	const kib, mib = 1 << 10, 1 << 20
	switch {
	case bytes >= mib:
		return fmt.Sprintf("about %.1f MiB", float64(bytes)/mib)
	case bytes >= kib:
		return fmt.Sprintf("about %.1f KiB", float64(bytes)/kib)
	}
	return fmt.Sprintf("about %d B", bytes)
}

// WriteText prints the graph for people.
func (g Graph) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%d store requests → %d specs → %d informers\n\nStores:\n", g.Requests, g.Specs, g.Informers)
	for _, s := range g.Stores {
		writeStoreText(w, "  ", s)
	}
	fmt.Fprintln(w, "\nControllers:")
	for _, c := range g.Controllers {
		fmt.Fprintf(w, "  %s (declared by %s)\n    primary: %s\n", c.Name, c.DeclaredBy, c.Primary)
		if c.WhenServed {
			fmt.Fprintln(w, "    waits for its kinds to be served (fxcontroller.WhenServed)")
		}
		if c.State != "" {
			fmt.Fprintf(w, "    state: %s\n", c.State)
		}
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
		if live := sh.Live; live != nil {
			live.writeText(w)
		}
	}
	if len(g.Webhooks) > 0 {
		fmt.Fprintln(w, "\nWebhooks (operations are the webhook configurations'):")
		for _, wh := range g.Webhooks {
			about := wh.Type
			if wh.Kind != "" {
				about += ", " + wh.Kind
			}
			order := ""
			if len(wh.ServedBy) > 1 {
				order = ", in this order"
			}
			fmt.Fprintf(w, "  %s (%s)\n    served by: %s%s\n", wh.Path, about, strings.Join(wh.ServedBy, ", "), order)
		}
	}
	if g.Clusters != nil {
		g.Clusters.writeText(w)
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

// writeStoreText prints the store s for people, indented.
func writeStoreText(w io.Writer, indent string, s Store) {
	if s.ViewOf != "" {
		fmt.Fprintf(w, "%s%s → view of %s\n", indent, s.Key, s.ViewOf)
	} else {
		fmt.Fprintf(w, "%s%s\n", indent, s.Key)
	}
	indent += "  "
	if s.Late {
		fmt.Fprintf(w, "%sstarted late, on first read\n", indent)
	}
	switch {
	case s.ControllersDisabled:
		fmt.Fprintf(w, "%sstopped: its controllers are disabled\n", indent)
	case s.WaitingForKind:
		fmt.Fprintf(w, "%swaiting for its kind to be served\n", indent)
	}
	if s.Failing != "" {
		fmt.Fprintf(w, "%s%s\n", indent, s.Failing)
	}
	fmt.Fprintf(w, "%sconsumers: %s\n", indent, strings.Join(s.Consumers, ", "))
	if len(s.Controllers) > 0 {
		fmt.Fprintf(w, "%scontrollers: %s\n", indent, strings.Join(s.Controllers, ", "))
	}
	if len(s.Indexes) > 0 {
		fmt.Fprintf(w, "%sindexes: %s\n", indent, strings.Join(s.Indexes, ", "))
	}
	if s.Objects > 0 {
		fmt.Fprintf(w, "%sholds: %d objects, %s\n", indent, s.Objects, heapText(s.Bytes, s.ViewOf != ""))
	}
}

// writeText prints the live group for people.
func (l *LiveSharding) writeText(w io.Writer) {
	total, running := 0, 0
	for _, b := range l.Buckets {
		total += b.Objects
	}
	for _, m := range l.Members {
		if !m.Expired {
			running++
		}
	}
	fmt.Fprintf(w, "\nIn the cluster now: %d replicas running, %d objects in %d buckets, %d handovers:\n", running, total, len(l.Buckets), l.Handovers)
	for _, m := range l.Members {
		state := ""
		if m.Expired {
			state = " (stopped, or stopping: no live member Lease)"
		}
		fmt.Fprintf(w, "  %s%s: %d buckets %v, %d objects\n", m.Identity, state, len(m.Buckets), m.Buckets, m.Objects)
	}
	for _, b := range l.Buckets {
		switch {
		case b.Holder == "":
			fmt.Fprintf(w, "  bucket %d: no holder, %d objects\n", b.Bucket, b.Objects)
		case b.Expired:
			fmt.Fprintf(w, "  bucket %d: held by %s, expired (not renewed since %s), %d objects\n", b.Bucket, b.Holder, b.Renewed.Format(time.RFC3339), b.Objects)
		}
	}
}
