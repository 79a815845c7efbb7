package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/internal/controlplane"
	"github.com/fxkube/fxkube/internal/testenv"
)

// The sharded workload: shardObjects ConfigMaps (the suite's ConfigMap,
// relabelled) in shardNamespace, which also holds the Leases. Each replica
// runs one fxshard store of them, sharded by uid, and a controller on it
// that only notes what it reconciled. No other workload's spec selects
// them.
const (
	shardObjects   = 10_000
	shardNamespace = "fxkube-bench-shards"
	shardApp       = "fxkube-bench-shards"
	// shardWindow is how long the replicas run once stable before their
	// heap is read, to count their steady requests: 10 RetryPeriods.
	shardWindow = 10 * 2 * time.Second // fxshard.Config.RetryPeriod's default
)

var (
	shardSelector  = appLabel + "=" + shardApp
	shardReplicas  = []int{1, 2, 4}
	shardResources = []string{"configmaps", "leases"}
)

// shardResults keeps BenchmarkShards' figures for its tables, printed after
// the suite's.
var shardResults = &recorder{samples: make(map[sampleKey][]float64)}

// BenchmarkShards runs R replicas of a controller sharded with fxshard, each
// replica its own process (the test binary re-executed, like the suite's
// children), over 10,000 ConfigMaps: with R = 1, 2 and 4 on a control plane
// of its own with ShardedListAndWatch on, so that the API server sends each
// bucket's store only its bucket; and with R = 2 on the suite's control
// plane, where the gate is off and each bucket's store is a view of one
// store of every object, selected on the client. The
// R-th replica starts once the others share the buckets, so that it only
// ever holds its share: its heap is the figure, and its buckets' moves to
// it a clean hand-over on a join. Then it stops with SIGTERM (a clean
// hand-over on a stop) and, with 4, one of the others is killed with
// SIGKILL (a crash). The Leases' timings are fxshard's defaults.
func BenchmarkShards(b *testing.B) {
	// Each control plane is made ready on first use, so that a -bench
	// pattern that selects only some sub-benchmarks starts only theirs.
	var on *shardCluster
	for _, r := range shardReplicas {
		b.Run(fmt.Sprintf("gate=on/replicas=%d", r), func(sb *testing.B) {
			if on == nil {
				on = startShardCluster(b, sb)
			}
			on.bench(sb, r)
		})
	}
	b.Run("gate=off/replicas=2", func(sb *testing.B) {
		newShardCluster(sb, "off", testenv.Config(sb), testenv.KubeconfigPath(sb)).bench(sb, 2)
	})
}

// startShardCluster starts a control plane with ShardedListAndWatch on,
// stopped when b ends, and makes it hold the workload's objects (sb is the
// benchmark that first needs it).
func startShardCluster(b, sb *testing.B) *shardCluster {
	dir, err := controlplane.AssetsDir()
	if err != nil {
		sb.Fatal(err)
	}
	began := time.Now()
	cp, err := controlplane.Start(dir, controlplane.WithFeatureGates(map[string]bool{"ShardedListAndWatch": true}))
	if err != nil {
		sb.Fatal(err)
	}
	b.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			b.Error(err)
		}
	})
	sb.Logf("started kube-apiserver --feature-gates=ShardedListAndWatch=true in %s", time.Since(began).Round(time.Millisecond))
	kubeconfig := filepath.Join(b.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, cp.Kubeconfig, 0o600); err != nil {
		sb.Fatal(err)
	}
	return newShardCluster(sb, "on", rest.CopyConfig(cp.Config), kubeconfig)
}

// shardCluster is a control plane holding the sharded workload's objects.
type shardCluster struct {
	gate       string // ShardedListAndWatch, "on" or "off"
	kube       *kubernetes.Clientset
	kubeconfig string
	idle       testenv.APIRequests            // before any replica ran, on shardResources
	idleOf     map[string]testenv.APIRequests // the same, by resource
}

func newShardCluster(b *testing.B, gate string, cfg *rest.Config, kubeconfig string) *shardCluster {
	b.Helper()
	cfg.QPS, cfg.Burst = -1, 0
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	if err := ensureShardObjects(b.Context(), kube, shardObjects); err != nil {
		b.Fatal(err)
	}
	b.Logf("gate %s: the cluster holds %d sharded ConfigMaps (%s)", gate, shardObjects, time.Since(began).Round(time.Millisecond))
	c := &shardCluster{gate: gate, kube: kube, kubeconfig: kubeconfig, idleOf: make(map[string]testenv.APIRequests)}
	if c.idle, err = testenv.ScrapeAPIRequests(b.Context(), kube.RESTClient(), shardResources...); err != nil {
		b.Fatal(err)
	}
	for _, res := range shardResources {
		if c.idleOf[res], err = testenv.ScrapeAPIRequests(b.Context(), kube.RESTClient(), res); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// shardConfigMap is the workload's object i: the suite's ConfigMap i, in
// shardNamespace with only shardSelector's label.
func shardConfigMap(i int) *corev1.ConfigMap {
	cm := newConfigMap(i)
	cm.Namespace, cm.Labels = shardNamespace, map[string]string{appLabel: shardApp}
	return cm
}

// ensureShardObjects creates the namespace and those of n objects missing.
func ensureShardObjects(ctx context.Context, kube kubernetes.Interface, n int) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shardNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace: %w", err)
	}
	list, err := kube.CoreV1().ConfigMaps(shardNamespace).List(ctx, metav1.ListOptions{LabelSelector: shardSelector})
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(list.Items))
	for _, cm := range list.Items {
		have[cm.Name] = true
	}
	return parallel(ctx, 0, n, createWorkers, func(ctx context.Context, i int) error {
		if have[nameOf(i)] {
			return nil
		}
		_, err := kube.CoreV1().ConfigMaps(shardNamespace).Create(ctx, shardConfigMap(i), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// shardRun is what one run with R replicas measured.
type shardRun struct {
	fresh       *replicaState // the replica that joined last, once the window is over
	freshStart  *replicaState // the same, when it first was stable
	others      []*replicaState
	othersStart []*replicaState
	watches     map[string]float64
	join        []move
	joinTotal   time.Duration // the last replica started → every bucket it took reconciled
	stop        []move
	stopTotal   time.Duration // SIGTERM → every bucket it held reconciled elsewhere
	crash       []move
	crashAt     int64
	crashTotal  time.Duration // SIGKILL → every bucket it held reconciled elsewhere
}

func (c *shardCluster) bench(b *testing.B, replicas int) {
	name := fmt.Sprintf("%s/%d", c.gate, replicas)
	// This invocation's figures, for its benchmark line; shardResults
	// gathers every invocation's (-count) for the tables.
	these := &recorder{samples: make(map[sampleKey][]float64)}
	for b.Loop() {
		waitIdle(b, c.kube.RESTClient(), c.idle, shardResources)
		settle(b)
		c.report(b, name, c.run(b, replicas), these, shardResults)
	}
	b.ReportMetric(0, "ns/op")
	for _, metric := range []string{mHeapInuse, mHeapAlloc, "received-objects", "join-gap-ms", "stop-gap-ms", "crash-gap-ms"} {
		if v, ok := these.median(shardObjects, name, metric); ok {
			b.ReportMetric(v, metric)
		}
	}
}

// run runs the workload once with replicas replicas; see BenchmarkShards.
func (c *shardCluster) run(b *testing.B, replicas int) *shardRun {
	ctx := b.Context()
	err := c.kube.CoordinationV1().Leases(shardNamespace).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: fxshard.LeaseLabel + "=" + shardGroup})
	if err != nil {
		b.Fatal(err)
	}
	g := &replicaGroup{b: b, cluster: c, name: fmt.Sprintf("%s-%d", c.gate, replicas)}
	var others []*replicaProc
	for i := range replicas - 1 {
		others = append(others, g.start(fmt.Sprintf("bg-%d", i)))
	}
	if len(others) > 0 {
		g.stable(others, false)
	}
	fresh := g.start("new")
	all := append(slices.Clone(others), fresh)
	first := g.stable(all, false)
	time.Sleep(shardWindow)
	watches := make(map[string]float64)
	for _, res := range shardResources {
		now, err := testenv.ScrapeAPIRequests(ctx, c.kube.RESTClient(), res)
		if err != nil {
			b.Fatal(err)
		}
		watches[res] = now.OpenWatches - c.idleOf[res].OpenWatches
	}
	last := g.stable(all, true)
	run := &shardRun{fresh: last[fresh.id], freshStart: first[fresh.id], watches: watches}
	for _, p := range others {
		run.others, run.othersStart = append(run.others, last[p.id]), append(run.othersStart, first[p.id])
	}
	if replicas == 1 {
		g.stopAll(all)
		return run
	}
	run.join = movesTo(g.events(), fresh.started.UnixNano(), fresh.id)
	run.joinTotal = lastServed(run.join, fresh.started.UnixNano())

	stopped := time.Now()
	g.sigterm(fresh)
	g.stable(others, false)
	run.stop = movesFrom(g.events(), stopped.UnixNano(), fresh.id)
	run.stopTotal = lastServed(run.stop, stopped.UnixNano())

	if replicas > 2 {
		killed, rest := others[0], others[1:]
		run.crashAt = time.Now().UnixNano()
		g.sigkill(killed)
		g.stable(rest, false)
		run.crash = movesFrom(g.events(), run.crashAt, killed.id)
		run.crashTotal = lastServed(run.crash, run.crashAt)
		others = rest
	}
	g.stopAll(others)
	return run
}

// report records a run's figures under name, in each of into.
func (c *shardCluster) report(b *testing.B, name string, run *shardRun, into ...*recorder) {
	rec := func(metric string, v float64) {
		for _, r := range into {
			r.record(shardObjects, name, metric, v)
		}
	}
	const mib = 1 << 20
	rec(mHeapInuse, float64(run.fresh.HeapInuse)/mib)
	rec(mHeapAlloc, float64(run.fresh.HeapAlloc)/mib)
	for _, o := range run.others {
		rec("others-"+mHeapInuse, float64(o.HeapInuse)/mib)
		rec("others-"+mHeapAlloc, float64(o.HeapAlloc)/mib)
	}
	rec("buckets", float64(len(run.fresh.Buckets)))
	rec("objects", float64(run.fresh.Objects))
	rec("received-objects", float64(run.fresh.Received))
	rec("outside-objects", float64(run.fresh.Outside))
	for class, n := range run.freshStart.Sent {
		rec("start "+class, float64(n))
	}
	rate := func(last, first *replicaState) map[string]float64 {
		out := make(map[string]float64)
		window := time.Duration(last.at - first.at).Seconds()
		for class, n := range last.Sent {
			out[class] = float64(n-first.Sent[class]) / window
		}
		return out
	}
	all := make(map[string]float64)
	for class, v := range rate(run.fresh, run.freshStart) {
		rec("steady "+class, v)
		all[class] += v
	}
	for i := range run.others {
		for class, v := range rate(run.others[i], run.othersStart[i]) {
			all[class] += v
		}
	}
	for class, v := range all {
		rec("all steady "+class, v)
	}
	for res, n := range run.watches {
		rec("open watches "+res, n)
	}
	b.Logf("%s: fresh replica holds buckets %v (%d objects), heap in use %.1f MiB, live %.1f MiB; others in use %v",
		name, run.fresh.Buckets, run.fresh.Objects, float64(run.fresh.HeapInuse)/mib, float64(run.fresh.HeapAlloc)/mib, heapsOf(run.others))
	for _, s := range []struct {
		scenario string
		moves    []move
		since    int64
		total    time.Duration
	}{{"join", run.join, 0, run.joinTotal}, {"stop", run.stop, 0, run.stopTotal}, {"crash", run.crash, run.crashAt, run.crashTotal}} {
		if len(s.moves) == 0 {
			continue
		}
		rec(s.scenario+"-total-ms", ms(s.total))
		rec(s.scenario+"-moved", float64(len(s.moves)))
		for _, m := range s.moves {
			from := m.releasing
			switch {
			case s.since != 0:
				from = s.since
			case m.releasing == 0 || m.released == 0:
				b.Errorf("%s: %s: bucket %d taken by %s with no release seen", name, s.scenario, m.bucket, m.to)
				continue
			default:
				rec(s.scenario+"-drain-ms", nsMillis(m.released-m.releasing))
				rec(s.scenario+"-free-ms", nsMillis(m.acquired-m.released))
			}
			rec(s.scenario+"-gap-ms", nsMillis(m.serving-from))
			rec(s.scenario+"-take-ms", nsMillis(m.acquired-from))
			rec(s.scenario+"-sync-ms", nsMillis(m.serving-m.acquired))
		}
		b.Logf("%s: %s moved %d buckets in %s", name, s.scenario, len(s.moves), s.total.Round(time.Millisecond))
	}
}

func heapsOf(states []*replicaState) string {
	var parts []string
	for _, s := range states {
		parts = append(parts, fmt.Sprintf("%.1f", float64(s.HeapInuse)/(1<<20)))
	}
	return "[" + strings.Join(parts, " ") + "] MiB"
}

func nsMillis(d int64) float64 { return float64(d) / float64(time.Millisecond) }

// move is one bucket changing hands, as the replicas' events tell it: the
// unix nanoseconds of the old holder's Releasing and Lease release (0 when
// it was killed), of the new holder's taking it and of its first reconcile
// of the bucket's objects.
type move struct {
	bucket                                 int
	from, to                               string
	releasing, released, acquired, serving int64
}

// movesTo returns the moves of the buckets that to took after since.
func movesTo(events []replicaLine, since int64, to string) []move {
	return moves(events, since, func(m move) bool { return m.to == to })
}

// movesFrom returns the moves of the buckets from held that others took
// after since.
func movesFrom(events []replicaLine, since int64, from string) []move {
	return moves(events, since, func(m move) bool { return m.from == from })
}

// moves returns the moves of buckets taken after since that keep says
// are of interest, each with the events of its old and new holder: the
// last Releasing (or loss) of the bucket by another replica between since
// and the take, and that replica's release after it, or, when there is
// none (the old holder was killed), the holder the Lease named; and the new
// holder's first reconcile after the take.
func moves(events []replicaLine, since int64, keep func(move) bool) []move {
	events = slices.Clone(events)
	sort.SliceStable(events, func(i, j int) bool { return events[i].At < events[j].At })
	var out []move
	for i, a := range events {
		if a.Event != evAcquired || a.At < since {
			continue
		}
		m := move{bucket: a.Bucket, from: a.From, to: a.Replica, acquired: a.At}
		for _, e := range events[:i] {
			if e.Bucket == m.bucket && e.Replica != m.to && e.At >= since && (e.Event == evReleasing || e.Event == evLost) {
				m.from, m.releasing = e.Replica, e.At
			}
		}
		for _, e := range events {
			if m.releasing != 0 && e.Bucket == m.bucket && e.Replica == m.from && e.Event == evReleased && e.At >= m.releasing {
				m.released = e.At // perhaps logged after the new holder took it
				break
			}
		}
		for _, e := range events[i+1:] {
			if e.Bucket == m.bucket && e.Replica == m.to && e.Event == evServing {
				m.serving = e.At
				break
			}
		}
		if keep(m) && m.serving != 0 {
			out = append(out, m)
		}
	}
	return out
}

// lastServed returns the time from since until the last of moves was
// reconciled.
func lastServed(moves []move, since int64) time.Duration {
	var last int64
	for _, m := range moves {
		last = max(last, m.serving)
	}
	if last == 0 {
		return 0
	}
	return time.Duration(last - since)
}

// replicaGroup runs the replicas of one run and collects their events.
type replicaGroup struct {
	b       *testing.B
	cluster *shardCluster
	name    string // of the run, for profiles
	mu      sync.Mutex
	log     []replicaLine
}

// replicaProc is one replica's process.
type replicaProc struct {
	id      string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *testenv.Buffer
	replies chan replicaLine
	exited  chan error // receives Wait's result once
	done    bool
	started time.Time
}

func (g *replicaGroup) events() []replicaLine {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.log)
}

// start starts a replica with identity id.
func (g *replicaGroup) start(id string) *replicaProc {
	b := g.b
	b.Helper()
	rp := replicaParams{Identity: id, Namespace: shardNamespace, Objects: shardObjects}
	if dir := os.Getenv(profileEnv); dir != "" {
		rp.HeapProfile = filepath.Join(dir, fmt.Sprintf("shards-%s-%s-%d.heap", g.name, id, time.Now().UnixNano()))
	}
	params, err := json.Marshal(rp)
	if err != nil {
		b.Fatal(err)
	}
	p := &replicaProc{id: id, stderr: &testenv.Buffer{}, replies: make(chan replicaLine, 1), exited: make(chan error, 1)}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = append(slices.Clone(os.Environ()), replicaEnv+"="+string(params), "KUBECONFIG="+g.cluster.kubeconfig)
	p.cmd.Stderr = p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if !p.done {
			_ = p.cmd.Process.Kill()
			b.Logf("killed replica %s, left running: %v", p.id, <-p.exited)
		}
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			var line replicaLine
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				fmt.Fprintf(p.stderr, "stdout: %s\n", sc.Bytes())
				continue
			}
			switch line.Event {
			case evStable, evFailed:
				p.replies <- line
			default:
				g.mu.Lock()
				g.log = append(g.log, line)
				g.mu.Unlock()
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.exited <- p.cmd.Wait()
	}()
	return p
}

// stable waits until every replica of procs is stable (see replicaCommand)
// in a group of len(procs) members, checks that the bucket Leases say so,
// and returns their states by identity.
func (g *replicaGroup) stable(procs []*replicaProc, heap bool) map[string]*replicaState {
	b := g.b
	b.Helper()
	cmd, err := json.Marshal(replicaCommand{Members: len(procs), Heap: heap})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range procs {
		if _, err := p.stdin.Write(append(cmd, '\n')); err != nil {
			b.Fatalf("replica %s: %v\n%s", p.id, err, p.stderr)
		}
	}
	states := make(map[string]*replicaState, len(procs))
	for _, p := range procs {
		select {
		case line := <-p.replies:
			if line.Event == evFailed {
				b.Fatalf("replica %s not stable among %d: %s\n%s", p.id, len(procs), line.Error, p.stderr)
			}
			line.State.at = line.At
			states[p.id] = line.State
		case err := <-p.exited:
			p.done = true
			b.Fatalf("replica %s exited: %v\n%s", p.id, err, p.stderr)
		case <-b.Context().Done():
			b.Fatal(b.Context().Err())
		}
	}
	g.checkLeases(procs)
	return states
}

// checkLeases fails unless the bucket Leases are held by procs, each its
// fair share.
func (g *replicaGroup) checkLeases(procs []*replicaProc) {
	b := g.b
	b.Helper()
	group, err := fxshard.ReadGroup(b.Context(), g.cluster.kube, fxshard.Config{Namespace: shardNamespace, Name: shardGroup})
	if err != nil {
		b.Fatal(err)
	}
	held := make(map[string]int)
	for _, l := range group.Buckets {
		if l.Holder != "" {
			held[l.Holder]++
		}
	}
	ids := make([]string, len(procs))
	for i, p := range procs {
		ids[i] = p.id
	}
	want := make(map[string]int)
	for _, id := range ids {
		want[id] = fairShareOf(fxshard.DefaultBuckets, ids, id)
	}
	if !maps.Equal(held, want) {
		b.Fatalf("bucket Leases held %v; want %v", held, want)
	}
}

// sigterm stops p with SIGTERM and waits until it exited.
func (g *replicaGroup) sigterm(p *replicaProc) {
	g.b.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		g.b.Fatal(err)
	}
	g.exited(p)
}

// exited waits until p, stopped with SIGTERM, exited, which it must do
// cleanly.
func (g *replicaGroup) exited(p *replicaProc) {
	g.b.Helper()
	select {
	case err := <-p.exited:
		p.done = true
		if err != nil {
			g.b.Fatalf("replica %s, stopped with SIGTERM: %v\n%s", p.id, err, p.stderr)
		}
	case <-time.After(90 * time.Second):
		g.b.Fatalf("replica %s still running 90s after SIGTERM\n%s", p.id, p.stderr)
	}
}

// sigkill kills p with SIGKILL and waits until it is gone.
func (g *replicaGroup) sigkill(p *replicaProc) {
	g.b.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		g.b.Fatal(err)
	}
	err := <-p.exited
	p.done = true
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		g.b.Fatalf("replica %s, killed: %v", p.id, err)
	}
}

// stopAll stops procs with SIGTERM, all at once.
func (g *replicaGroup) stopAll(procs []*replicaProc) {
	g.b.Helper()
	for _, p := range procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			g.b.Fatal(err)
		}
	}
	for _, p := range procs {
		g.exited(p)
	}
}
