package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/fx"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcontroller"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
)

// A replica is this test binary run again as one replica of the sharded
// workload (BenchmarkShards): an fxkube app whose one controller is sharded
// across the replicas with fxshard. It runs until SIGTERM (or until its
// stdin closes), reading commands from stdin and writing what happens to it
// on stdout, one JSON replicaLine each.
const replicaEnv = "FXKUBE_BENCH_REPLICA"

// replicaParams tell a replica who it is and where its objects are.
type replicaParams struct {
	Identity  string `json:"identity"`
	Namespace string `json:"namespace"` // of the objects and the Leases
	Objects   int    `json:"objects"`
	// HeapProfile, when set, is where the replica writes a heap profile
	// each time it reads its heap (profileEnv).
	HeapProfile string `json:"heapProfile,omitempty"`
}

// shardGroup names the replicas' group of Leases (fxshard.Config.Name).
const shardGroup = "bench"

// replicaCommand asks a replica to wait until it is stable: the group has
// Members live members, this replica holds its fair share and nothing
// more, every bucket's store has synced and the controller has reconciled
// every object of them; and then to report its state, with its heap when
// Heap is set.
type replicaCommand struct {
	Members int  `json:"members"`
	Heap    bool `json:"heap"`
}

// The events of a replicaLine.
const (
	evAcquired  = "acquired"  // the Coordinator took a bucket
	evServing   = "serving"   // the controller reconciled the first object of a bucket taken
	evReleasing = "releasing" // the Coordinator gave a bucket up: Owns turned false, the drain began
	evReleased  = "released"  // the bucket's Lease was cleared (or found another's)
	evLost      = "lost"      // renewals failed, or another took it
	evStable    = "stable"    // the reply to a command
	evFailed    = "failed"    // the reply to a command that could not be met
	evStopped   = "stopped"   // the app stopped after SIGTERM
)

// replicaLine is one thing that happened to a replica.
type replicaLine struct {
	Replica string        `json:"replica"`
	Event   string        `json:"event"`
	Bucket  int           `json:"bucket"`
	At      int64         `json:"at"` // unix nanoseconds: one clock for every process of the machine
	Reason  string        `json:"reason,omitempty"`
	From    string        `json:"from,omitempty"` // an acquisition's previous holder, as the Lease named it
	State   *replicaState `json:"state,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// replicaState is what a replica reports when it is stable.
type replicaState struct {
	Buckets  []int `json:"buckets"`
	Objects  int   `json:"objects"`
	Received int64 `json:"received"` // objects its stores received in lists and watch events
	Outside  int64 `json:"outside"`  // of those, outside their shard: dropped on the client
	// HeapInuse and HeapAlloc are after two GCs, above the heap before the
	// app was built; only when the command asked.
	HeapInuse int64          `json:"heapInuse"`
	HeapAlloc int64          `json:"heapAlloc"`
	Sent      map[string]int `json:"sent"` // requests since the app was built, by shardRequestClass

	at int64 // when the replica sent it, unix nanoseconds: set by the benchmark
}

// replica is the child's side: the app, the sharded store and controller,
// and what the controller reconciled since each bucket was taken.
type replica struct {
	params replicaParams
	out    *lineWriter
	store  *fxshard.Store[*corev1.ConfigMap]
	shards *fxshard.Shards

	// stamp is, by bucket, a number unique to its current acquisition;
	// seen, by object index, the stamp of its bucket when it was last
	// reconciled; done, by bucket, the objects reconciled since then; served,
	// by bucket, whether one was.
	next   atomic.Int64
	stamp  []atomic.Int64
	seen   []atomic.Int64
	done   []atomic.Int64
	served []atomic.Bool
}

func newReplica(p replicaParams, out *lineWriter) *replica {
	return &replica{
		params: p, out: out,
		stamp: make([]atomic.Int64, fxshard.DefaultBuckets), done: make([]atomic.Int64, fxshard.DefaultBuckets),
		served: make([]atomic.Bool, fxshard.DefaultBuckets), seen: make([]atomic.Int64, p.Objects),
	}
}

// options are the replica's modules: fxshard, with the events logged to the
// replica, and one module with a sharded store of the objects and its
// controller.
func (r *replica) options() []fx.Option {
	return []fx.Option{
		fxshard.Options(fxshard.Config{
			Namespace: r.params.Namespace, Name: shardGroup, Identity: r.params.Identity,
			Logger: zap.New(&eventCore{r: r}),
		}),
		fx.Module("sharded", fxcontroller.Provide(func(shards *fxshard.Shards) (*fxcontroller.Controller, error) {
			store, err := fxshard.For[*corev1.ConfigMap](shards, fxstore.Spec{Namespace: r.params.Namespace, LabelSelector: shardSelector}, fxstore.ShardByUID)
			if err != nil {
				return nil, err
			}
			r.store, r.shards = store, shards
			return fxcontroller.New("sharded", store, reconcile.Func(r.reconcile))
		})),
	}
}

func (r *replica) reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	cm, err := r.store.Get(req.Namespace, req.Name)
	if err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	b, err := r.shards.Coordinator().Buckets().Of(cm, fxstore.ShardByUID)
	if err != nil {
		return reconcile.Result{}, err
	}
	stamp := r.stamp[b].Load()
	if i := indexOf(cm.Name); i >= 0 && i < len(r.seen) && r.seen[i].Swap(stamp) != stamp {
		r.done[b].Add(1)
	}
	if r.served[b].CompareAndSwap(false, true) {
		r.out.write(replicaLine{Event: evServing, Bucket: b, At: time.Now().UnixNano()})
	}
	return reconcile.Result{}, nil
}

// acquired starts counting bucket's reconciles afresh. The Coordinator logs
// an acquisition before it hands the bucket to the store and controller.
func (r *replica) acquired(bucket int) {
	r.stamp[bucket].Store(r.next.Add(1))
	r.done[bucket].Store(0)
	r.served[bucket].Store(false)
}

// stable reports whether the replica is stable for cmd (see replicaCommand).
func (r *replica) stable(cmd replicaCommand) bool {
	c := r.shards.Coordinator()
	members := c.Members()
	owned := c.Owned()
	if len(members) != cmd.Members || len(owned) != fairShareOf(c.Buckets().Len(), members, c.Identity()) ||
		!slices.Equal(r.store.Buckets(), owned) || !r.store.HasSynced() {
		return false
	}
	var done int64
	for _, b := range owned {
		done += r.done[b].Load()
	}
	n, err := r.store.Count()
	return err == nil && done == int64(n)
}

// fairShareOf is identity's share of buckets among members, as fxshard
// documents it: buckets/R, one more for the first buckets%R members sorted
// by identity.
func fairShareOf(buckets int, members []string, identity string) int {
	sorted := slices.Sorted(slices.Values(members))
	k := slices.Index(sorted, identity)
	share := buckets / len(sorted)
	if k >= 0 && k < buckets%len(sorted) {
		share++
	}
	return share
}

// state reports the replica's state once stable, its heap above base when
// cmd asks for it.
func (r *replica) state(cmd replicaCommand, sent *requestCounter, baseInuse, baseAlloc int64) (*replicaState, error) {
	s := &replicaState{Buckets: r.shards.Coordinator().Owned(), Sent: sent.counts()}
	if cmd.Heap {
		inuse, alloc := heapNow()
		s.HeapInuse, s.HeapAlloc = inuse-baseInuse, alloc-baseAlloc
		if r.params.HeapProfile != "" {
			if err := writeHeapProfile(r.params.HeapProfile); err != nil {
				return nil, err
			}
		}
	}
	n, err := r.store.Count()
	if err != nil {
		return nil, err
	}
	s.Objects = n
	families, err := metrics.Registry.Gather()
	if err != nil {
		return nil, err
	}
	for _, f := range families {
		var into *int64
		switch f.GetName() {
		case "fxkube_store_received_total":
			into = &s.Received
		case "fxkube_store_shard_filtered_on_client_total":
			into = &s.Outside
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			*into += int64(m.GetCounter().GetValue())
		}
	}
	return s, nil
}

// runReplica runs the replica params names and returns the process's exit
// code.
func runReplica(params string) int {
	var p replicaParams
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		fmt.Fprintf(os.Stderr, "bench replica: %s: %v\n", replicaEnv, err)
		return 2
	}
	if err := serveReplica(p, os.Stdin, &lineWriter{w: os.Stdout, replica: p.Identity}); err != nil {
		fmt.Fprintf(os.Stderr, "bench replica %s: %v\n", p.Identity, err)
		return 1
	}
	return 0
}

func serveReplica(p replicaParams, commands io.Reader, out *lineWriter) error {
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	cfg, err := config.GetConfig()
	if err != nil {
		return err
	}
	if p.HeapProfile != "" {
		runtime.MemProfileRate = 4096 // as the suite's children profile
	}
	r := newReplica(p, out)
	sent := &requestCounter{class: shardRequestClass}
	sysCfg := rest.CopyConfig(cfg)
	sysCfg.Wrap(sent.wrap)
	baseInuse, baseAlloc := heapNow()
	sys, err := newFxkubeApp(sysCfg, func(map[string]store) []fx.Option { return r.options() })
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = sys.app.Start(startCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}

	cmds := make(chan replicaCommand)
	go func() {
		// The parent gone, stdin closes: stop as on SIGTERM.
		defer stop()
		sc := bufio.NewScanner(commands)
		for sc.Scan() {
			var cmd replicaCommand
			if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
				out.write(replicaLine{Event: evFailed, Error: err.Error()})
				continue
			}
			select {
			case cmds <- cmd:
			case <-ctx.Done():
				return
			}
		}
	}()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case cmd := <-cmds:
			// A move can take LeaseDuration and more (a crashed replica's
			// buckets); a replica that never settles fails the benchmark.
			wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
			err := poll(wait, "wait until stable", 10*time.Millisecond, func() (bool, error) { return r.stable(cmd), nil })
			cancel()
			var s *replicaState
			if err == nil {
				s, err = r.state(cmd, sent, baseInuse, baseAlloc)
			}
			if err != nil {
				out.write(replicaLine{Event: evFailed, At: time.Now().UnixNano(), Error: r.describe(err)})
				continue
			}
			out.write(replicaLine{Event: evStable, At: time.Now().UnixNano(), State: s})
		}
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = sys.app.Stop(stopCtx)
	out.write(replicaLine{Event: evStopped, At: time.Now().UnixNano()})
	return err
}

// describe adds what the replica holds to err, to tell why it is not
// stable.
func (r *replica) describe(err error) string {
	c := r.shards.Coordinator()
	n, _ := r.store.Count()
	return fmt.Sprintf("%v: members %v, owned %v, stores of %v, synced %v, %d objects", err,
		c.Members(), c.Owned(), r.store.Buckets(), r.store.HasSynced(), n)
}

// lineWriter writes a replica's lines, one JSON object each, from any
// goroutine.
type lineWriter struct {
	mu      sync.Mutex
	w       io.Writer
	replica string
}

func (l *lineWriter) write(line replicaLine) {
	line.Replica = l.replica
	raw, err := json.Marshal(line)
	if err != nil {
		raw, _ = json.Marshal(replicaLine{Replica: l.replica, Event: evFailed, Error: err.Error()})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.Write(append(raw, '\n'))
}

// eventCore is a zap core that turns the Coordinator's log lines about
// buckets into a replica's events, and keeps nothing.
type eventCore struct{ r *replica }

// coordinatorEvents maps the Coordinator's messages to events.
var coordinatorEvents = map[string]string{
	"acquired bucket":      evAcquired,
	"releasing bucket":     evReleasing,
	"released bucket":      evReleased,
	"released lost bucket": evReleased,
	"bucket drained; its Lease is another's or gone":                         evReleased,
	"bucket drained, Lease not released; the others take it once it expires": evReleased,
	"lost bucket":                    evLost,
	"lost bucket while releasing it": evLost,
}

func (c *eventCore) Enabled(l zapcore.Level) bool      { return l >= zapcore.InfoLevel }
func (c *eventCore) With([]zapcore.Field) zapcore.Core { return c }
func (c *eventCore) Sync() error                       { return nil }

func (c *eventCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if _, ok := coordinatorEvents[e.Message]; ok {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *eventCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	line := replicaLine{Event: coordinatorEvents[e.Message], Bucket: -1, At: e.Time.UnixNano()}
	for _, f := range fields {
		switch f.Key {
		case "bucket":
			line.Bucket = int(f.Integer)
		case "reason":
			line.Reason = f.String
		case "previousHolder":
			line.From = f.String
		}
	}
	if line.Bucket < 0 {
		return errors.New("bench replica: a bucket event without its bucket: " + e.Message)
	}
	if line.Event == evAcquired {
		c.r.acquired(line.Bucket)
	}
	c.r.out.write(line)
	return nil
}

// shardRequestClass says what a replica's request is for: the pre-flight's
// classes as requestClass names them, and otherwise the resource and the
// verb as the API server's metrics name them ("configmaps WATCH", "leases
// UPDATE").
func shardRequestClass(req *http.Request) string {
	class := requestClass(req)
	switch class {
	case sentWatch, sentRead, sentOther:
	default:
		return class
	}
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	// /api/v1/... or /apis/group/version/...
	rest := parts[min(len(parts), 2):]
	if parts[0] == "apis" {
		rest = parts[min(len(parts), 3):]
	}
	named := len(rest) == 2
	if len(rest) >= 3 && rest[0] == "namespaces" {
		rest, named = rest[2:], len(rest) >= 4
	}
	if len(rest) == 0 {
		return sentOther
	}
	verb := map[string]string{http.MethodPost: "CREATE", http.MethodPut: "UPDATE", http.MethodPatch: "PATCH", http.MethodDelete: "DELETE", http.MethodGet: "GET"}[req.Method]
	switch {
	case class == sentWatch:
		verb = "WATCH"
	case req.Method == http.MethodGet && !named:
		verb = "LIST"
	case verb == "":
		verb = req.Method
	}
	return rest[0] + " " + verb
}
