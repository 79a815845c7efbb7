package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/fxstore"
	"github.com/fxkube/fxkube/internal/testenv"
)

// shareTimings are the Lease timings of the replicas sharing members
// out in tests, as fxshard's tests use them.
var shareTimings = fxshard.Config{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond}

// reconciled is one reconcile of a member by a replica, from start to end.
type reconciled struct {
	replica    string
	cluster    fxcluster.ClusterName
	start, end time.Time
}

// shareReplica is one replica of an app whose fleet shares its members
// out: a fleet and a controller that records its reconciles.
type shareReplica struct {
	name      string
	fleet     *fxcluster.Fleet
	partition *testenv.Partition
	cancel    context.CancelFunc
	done      sync.WaitGroup
}

func startShareReplica(t *testing.T, name, ns string, members map[fxcluster.ClusterName]*rest.Config, log *testenv.Records[reconciled]) *shareReplica {
	t.Helper()
	r := &shareReplica{name: name, partition: &testenv.Partition{}}
	leasesCfg := rest.CopyConfig(testenv.Config(t))
	leasesCfg.Wrap(r.partition.Wrap)
	leases, err := kubernetes.NewForConfig(leasesCfg)
	require.NoError(t, err)
	share := shareTimings
	share.Namespace, share.Name, share.Identity, share.Buckets = ns, "fleet", name, 2
	provider, _ := staticProvider(members)
	r.fleet = fxcluster.NewFleet(clientgoscheme.Scheme, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Named(name), fxcluster.Options{
		SyncTimeout: 20 * time.Second, StopTimeout: 5 * time.Second,
		Providers: []fxcluster.Provider{provider}, Share: &share, Leases: leases,
	})
	configMaps, err := fxcluster.For[*corev1.ConfigMap](r.fleet, fxstore.Spec{Namespace: "shared"})
	require.NoError(t, err)
	ctrl, err := fxcluster.NewController("record-"+name, configMaps, fxcluster.Func(func(_ context.Context, req fxcluster.Request) (reconcile.Result, error) {
		start := time.Now()
		time.Sleep(20 * time.Millisecond)
		log.Add(reconciled{replica: name, cluster: req.ClusterName, start: start, end: time.Now()})
		return reconcile.Result{}, nil
	}))
	require.NoError(t, err)
	require.False(t, ctrl.NeedLeaderElection(), "a controller of members shared out runs on every replica")
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	for _, rn := range []interface{ Start(context.Context) error }{r.fleet, ctrl} {
		r.done.Go(func() { assert.NoError(t, rn.Start(ctx)) })
	}
	t.Cleanup(r.stop)
	return r
}

// stop stops the replica cleanly: it gives its members back.
func (r *shareReplica) stop() {
	r.cancel()
	r.done.Wait()
}

// ready returns the members ready on the replica.
func (r *shareReplica) ready() []fxcluster.ClusterName {
	var names []fxcluster.ClusterName
	for _, info := range r.fleet.Clusters() {
		if info.State == fxcluster.Ready {
			names = append(names, info.Name)
		}
	}
	slices.Sort(names)
	return names
}

// Two replicas share three members out through two bucket Leases: each
// member is ready on one replica, whose controller alone reconciles it.
// One replica is then cut off from its Leases, as a crashed or
// partitioned replica is: it stops its members' work at the renew
// deadline, and the other takes them over once the Lease has expired.
// Under steady writes to every member, no member is ever reconciled by
// both replicas at once.
func TestReplicasShareMembersOut(t *testing.T) {
	ns, names, members, kubes := shareMembers(t)

	var log testenv.Records[reconciled]
	a := startShareReplica(t, "replica-a", ns, members, &log)
	b := startShareReplica(t, "replica-b", ns, members, &log)
	requireShared := func(replicas ...*shareReplica) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var all []fxcluster.ClusterName
			for _, r := range replicas {
				mine := r.ready()
				assert.NotEmpty(c, mine, "%s runs members", r.name)
				all = append(all, mine...)
			}
			slices.Sort(all)
			assert.Equal(c, names, all, "each member is ready on one replica")
		}, time.Minute, 50*time.Millisecond)
	}
	requireShared(a, b)

	// Steady writes to every member make reconciles.
	stopWriting := writeSteadily(t, kubes)
	time.Sleep(time.Second)
	before := map[string]int{}
	for _, r := range log.All() {
		before[r.replica]++
	}
	assert.Positive(t, before["replica-a"], "a reconciles its members")
	assert.Positive(t, before["replica-b"], "b reconciles its members")

	// A is cut off: b takes everything over.
	cut := time.Now()
	aHad := a.ready()
	a.partition.Cut()
	require.Eventually(t, func() bool { return slices.Equal(names, b.ready()) }, time.Minute, 10*time.Millisecond,
		"b takes a's members over")
	took := time.Since(cut)
	require.Eventually(t, func() bool { return len(a.fleet.Clusters()) == 0 }, time.Minute, 10*time.Millisecond,
		"a's members have left it: their stores are freed")
	time.Sleep(time.Second) // b reconciles its new members
	stopWriting()

	overlaps, counts := checkNoOverlap(log.All())
	assert.Empty(t, overlaps, "no member reconciled by both replicas at once")
	t.Logf("a held %v; b took them over %s after a was cut off (LeaseDuration %s, RenewDeadline %s); reconciles: %v",
		aHad, took.Round(time.Millisecond), shareTimings.LeaseDuration, shareTimings.RenewDeadline, counts)
	a.partition.Heal()
}

// checkNoOverlap returns the pairs of reconciles of one member by two
// replicas whose times overlap, and how many each replica made.
func checkNoOverlap(all []reconciled) (overlaps []string, counts map[string]int) {
	counts = map[string]int{}
	byCluster := map[fxcluster.ClusterName][]reconciled{}
	for _, r := range all {
		counts[r.replica]++
		byCluster[r.cluster] = append(byCluster[r.cluster], r)
	}
	for cluster, rs := range byCluster {
		for i, x := range rs {
			for _, y := range rs[i+1:] {
				if x.replica != y.replica && x.start.Before(y.end) && y.start.Before(x.end) {
					overlaps = append(overlaps, fmt.Sprintf("%s: %s %s-%s and %s %s-%s", cluster,
						x.replica, x.start.Format(time.StampMicro), x.end.Format(time.StampMicro),
						y.replica, y.start.Format(time.StampMicro), y.end.Format(time.StampMicro)))
				}
			}
		}
	}
	return overlaps, counts
}

// fleetProcess is a replica of test/fleetapp, run as a process.
type fleetProcess struct{ *testenv.AppProcess }

func startFleetProcess(t *testing.T, bin, name string, args []string) *fleetProcess {
	t.Helper()
	return &fleetProcess{testenv.StartAppProcess(t, bin, name, args...)}
}

// runs returns the members ready on the process: its /readyz check of
// each passes.
func (p *fleetProcess) runs(names []fxcluster.ClusterName) []fxcluster.ClusterName {
	var ready []fxcluster.ClusterName
	for _, name := range names {
		if testenv.Status(p.Probes, "/readyz/"+fxcluster.CheckName(name)) == http.StatusOK {
			ready = append(ready, name)
		}
	}
	return ready
}

// reconciles returns the process's reconciles, from its log.
func (p *fleetProcess) reconciles(t *testing.T) []reconciled {
	t.Helper()
	var out []reconciled
	for line := range strings.SplitSeq(p.Logs.String(), "\n") {
		var e struct {
			Msg     string
			Cluster string
			Began   float64
			TS      float64
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Msg != "reconciled" {
			continue
		}
		at := func(s float64) time.Time { return time.Unix(0, int64(s*1e9)) }
		out = append(out, reconciled{replica: p.Name, cluster: fxcluster.ClusterName(e.Cluster), start: at(e.Began), end: at(e.TS)})
	}
	return out
}

// Two replicas of an app share three members out (--shard-clusters).
// One is killed (SIGKILL): the other takes its members over once their
// Leases expire, with controller-runtime's timings, and no member is
// reconciled by both replicas at once.
func TestKilledReplicasMembersAreTakenOver(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "fleetapp")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/fxkube/fxkube/test/fleetapp").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	ns, names, members, kubes := shareMembers(t)
	args := []string{"--kubeconfig", testenv.KubeconfigPath(t), "--shard-clusters", "--shard-buckets", "2", "--shard-namespace", ns, "--stop-timeout", "5s"}
	for _, name := range names {
		path := filepath.Join(dir, string(name)+".kubeconfig")
		require.NoError(t, os.WriteFile(path, testenv.Kubeconfig(t, members[name]), 0o600))
		args = append(args, "--cluster-kubeconfig", string(name)+"="+path)
	}

	a := startFleetProcess(t, bin, "a", args)
	b := startFleetProcess(t, bin, "b", args)
	var aHad []fxcluster.ClusterName
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		aHad = a.runs(names)
		bHas := b.runs(names)
		assert.NotEmpty(c, aHad, "a runs members")
		assert.NotEmpty(c, bHas, "b runs members")
		all := append(slices.Clone(aHad), bHas...)
		slices.Sort(all)
		assert.Equal(c, names, all, "each member runs on one replica")
	}, 2*time.Minute, 100*time.Millisecond, "a: %s\nb: %s", a.Logs, b.Logs)

	stopWriting := writeSteadily(t, kubes)
	time.Sleep(2 * time.Second)

	killed := time.Now()
	require.NoError(t, a.Cmd.Process.Kill())
	require.Error(t, <-a.Exited, "a was killed")
	require.Eventually(t, func() bool { return slices.Equal(names, b.runs(names)) }, 2*time.Minute, 50*time.Millisecond,
		"b takes a's members over; b: %s", b.Logs)
	took := time.Since(killed)
	time.Sleep(2 * time.Second) // b reconciles what it took
	stopWriting()
	require.NoError(t, b.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-b.Exited:
		require.NoError(t, err, "b stops cleanly: %s", b.Logs)
	case <-time.After(time.Minute):
		t.Fatal("b did not stop")
	}

	all := append(a.reconciles(t), b.reconciles(t)...)
	overlaps, counts := checkNoOverlap(all)
	assert.Empty(t, overlaps, "no member reconciled by both replicas at once")
	var bAfter int
	for _, r := range all {
		if r.replica == "b" && slices.Contains(aHad, r.cluster) && r.start.After(killed) {
			bAfter++
		}
	}
	assert.Positive(t, bAfter, "b reconciles a's members")
	t.Logf("a held %v; b took them over %s after SIGKILL (LeaseDuration 15s, RetryPeriod 2s); reconciles: %v, %d by b of a's members after the kill",
		aHad, took.Round(time.Millisecond), counts, bAfter)
}

// shareMembers names three members for two replicas that share them
// out through two buckets: two in bucket 0 and one in bucket 1, so that
// each replica holds some. They are two control planes of their own and
// the test's, in which ns is the replicas' namespace. Each member has a
// namespace "shared".
func shareMembers(t *testing.T) (ns string, names []fxcluster.ClusterName, members map[fxcluster.ClusterName]*rest.Config, kubes map[fxcluster.ClusterName]kubernetes.Interface) {
	t.Helper()
	own := testenv.Config(t)
	ns = testenv.Namespace(t, kubernetes.NewForConfigOrDie(own), "share")
	cps := testenv.Members(t, 2)
	configs := []*rest.Config{cps[0].Config, cps[1].Config, own}
	buckets, err := fxshard.NewBuckets(2)
	require.NoError(t, err)
	members, kubes = map[fxcluster.ClusterName]*rest.Config{}, map[fxcluster.ClusterName]kubernetes.Interface{}
	inBucket := [2]int{}
	for i := 0; len(names) < len(configs); i++ {
		name := fxcluster.ClusterName(fmt.Sprintf("member-%d", i))
		b := buckets.OfValue(string(name))
		if inBucket[b] == 2-b {
			continue
		}
		inBucket[b]++
		cfg := configs[len(names)]
		members[name], kubes[name] = cfg, kubernetes.NewForConfigOrDie(cfg)
		_, err := kubes[name].CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shared"}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return ns, names, members, kubes
}

// writeSteadily creates and deletes ConfigMaps in namespace "shared" of
// every member until stop, so that their controllers reconcile.
func writeSteadily(t *testing.T, kubes map[fxcluster.ClusterName]kubernetes.Interface) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	var writer sync.WaitGroup
	writer.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			for name, kube := range kubes {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shared", Name: fmt.Sprintf("cm-%d", i%20)}}
				if _, err := kube.CoreV1().ConfigMaps("shared").Create(ctx, cm, metav1.CreateOptions{}); err != nil && ctx.Err() == nil && !apierrors.IsAlreadyExists(err) {
					t.Errorf("write to %s: %v", name, err)
					return
				}
				_ = kube.CoreV1().ConfigMaps("shared").Delete(ctx, cm.Name, metav1.DeleteOptions{})
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	stop = sync.OnceFunc(func() { cancel(); writer.Wait() })
	t.Cleanup(stop)
	return stop
}
