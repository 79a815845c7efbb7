package sharding_test

import (
	"bufio"
	"cmp"
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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/app"
	"github.com/fxkube/fxkube/fxshard"
	"github.com/fxkube/fxkube/internal/testenv"
	"github.com/fxkube/fxkube/modules/checksum"
)

// binDir holds the binary buildApp builds; TestMain removes it.
var binDir string

// buildApp builds cmd/app once for the tests of the package.
var buildApp = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "fxkube-sharding-")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "fxkube")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/fxkube/fxkube/cmd/app").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// process is a replica of the app, run from the built binary.
type process struct{ *testenv.AppProcess }

func startProcess(t *testing.T, bin, kubeconfig, ns, name string) *process {
	t.Helper()
	return &process{testenv.StartAppProcess(t, bin, name, "--kubeconfig", kubeconfig, "--stop-timeout", "20s",
		// The example's other controllers run on the leader only; the
		// sharded one on every replica.
		"--leader-elect", "--leader-election-namespace", ns, "--leader-election-id", "leader",
		"--shard-namespace", ns)}
}

func (p *process) ready() bool {
	resp, err := http.Get("http://" + p.Probes + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// written is a reconcile that stamped a ConfigMap, from a replica's log.
type written struct {
	replica, key string
	began, ended float64 // seconds since the epoch
}

func (p *process) written(t *testing.T) []written {
	t.Helper()
	var out []written
	for _, e := range p.logLines(t) {
		if e.Msg == "checksum written" {
			out = append(out, written{replica: p.Name, key: e.ConfigMap, began: e.Began, ended: e.TS})
		}
	}
	return out
}

// checkDescribe checks that `describe --cluster` shows the group as its
// Leases have it (holders: the buckets each replica holds), with the n
// objects each in its bucket, and the handovers of the take-over: at least
// 5 more than before (the handovers before the kill).
func checkDescribe(t *testing.T, bin, kubeconfig, ns string, holders map[string]int, n, before int) {
	t.Helper()
	out, err := exec.Command(bin, "describe", "--cluster", "-o", "json", "--kubeconfig", kubeconfig, "--shard-namespace", ns).Output()
	require.NoError(t, err, "describe --cluster: %s", out)
	var g app.Graph
	require.NoError(t, json.Unmarshal(out, &g))
	require.NotNil(t, g.Sharding)
	live := g.Sharding.Live
	require.NotNil(t, live, "describe --cluster shows the live group")
	shown := map[string]int{}
	objects := 0
	for _, m := range live.Members {
		if m.Expired {
			assert.Empty(t, m.Buckets, "%s: a stopped replica holds no bucket once they are taken over", m.Identity)
			continue
		}
		shown[m.Identity] = len(m.Buckets)
		assert.Positive(t, m.Objects, "%s holds objects", m.Identity)
		objects += m.Objects
	}
	assert.Equal(t, holders, shown, "each live replica's buckets, as the Leases say")
	assert.Equal(t, n, objects, "every object in one replica's bucket")
	perBucket := 0
	for _, b := range live.Buckets {
		assert.NotEmpty(t, b.Holder, "bucket %d is held", b.Bucket)
		perBucket += b.Objects
	}
	assert.Equal(t, n, perBucket)
	assert.GreaterOrEqual(t, live.Handovers-before, 5, "the killed replica's 5 or 6 buckets changed hands")

	out, err = exec.Command(bin, "describe", "--cluster", "--kubeconfig", kubeconfig, "--shard-namespace", ns).Output()
	require.NoError(t, err, "describe --cluster: %s", out)
	t.Logf("describe --cluster:\n%s", out)
	assert.Contains(t, string(out), fmt.Sprintf("In the cluster now: %d replicas running, %d objects in 16 buckets, %d handovers:\n", len(holders), n, live.Handovers))
	for id, buckets := range holders {
		assert.Contains(t, string(out), fmt.Sprintf("  %s: %d buckets ", id, buckets))
	}
}

// logLine is the part of a replica's JSON log lines the tests read.
type logLine struct {
	Msg       string  `json:"msg"`
	TS        float64 `json:"ts"`
	Store     string  `json:"store"`
	ConfigMap string  `json:"configMap"`
	Began     float64 `json:"began"`
}

func (p *process) logLines(t *testing.T) []logLine {
	t.Helper()
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(p.Logs.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			out = append(out, l)
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// Three replicas of the built binary share the example's sharded checksum
// controller over 3,000 ConfigMaps under churn, on an API server that
// applies shard selectors: every change is stamped, never by two replicas
// at once; a replica killed with SIGKILL has its buckets taken over; a new
// one gets its share; SIGTERM stops them all cleanly, their Leases given
// back.
func TestReplicas(t *testing.T) {
	kubeconfig := testenv.KubeconfigPath(t)
	checkReplicas(t, testenv.Config(t), kubeconfig, 3000, true)
}

// Without the feature gate, the same holds; each replica lists and watches
// every object once, serves its buckets as views of that store, and says so.
func TestReplicasWithoutTheGate(t *testing.T) {
	cp := withoutTheGate(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, cp.Kubeconfig, 0o600))
	checkReplicas(t, cp.Config, kubeconfig, 1000, false)
}

func checkReplicas(t *testing.T, cfg *rest.Config, kubeconfig string, n int, serverFilters bool) {
	bin, err := buildApp()
	require.NoError(t, err)
	ctx := t.Context()
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 500, 1000
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "replicas-"}}
	require.NoError(t, direct.Create(ctx, nsObj))
	ns := nsObj.Name
	name := func(i int) string { return fmt.Sprintf("cm-%04d", i) }
	parallel := func(f func(i int) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		work := make(chan int)
		for range 16 {
			wg.Go(func() {
				for i := range work {
					if err := f(i); err != nil {
						errs <- err
					}
				}
			})
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	}
	parallel(func(i int) error {
		return direct.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i), Labels: map[string]string{checksum.Label: "true"}},
			Data:       map[string]string{"round": "0"},
		})
	})
	round := 0
	churn := func() {
		t.Helper()
		round++
		parallel(func(i int) error {
			cm := &corev1.ConfigMap{}
			if err := direct.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, cm); err != nil {
				return err
			}
			cm.Data = map[string]string{"round": fmt.Sprint(round)}
			return client.IgnoreNotFound(direct.Update(ctx, cm))
		})
	}
	// stamped waits until every ConfigMap carries the checksum of its data,
	// and returns how long that took.
	stamped := func(msg string) time.Duration {
		t.Helper()
		start := time.Now()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var list corev1.ConfigMapList
			if !assert.NoError(c, direct.List(ctx, &list, client.InNamespace(ns))) {
				return
			}
			stale := 0
			for _, cm := range list.Items {
				if cm.Annotations[checksum.Annotation] != checksum.Sum(&cm) {
					stale++
				}
			}
			assert.Zero(c, stale, "ConfigMaps whose checksum is not their data's")
		}, 90*time.Second, 250*time.Millisecond, msg)
		return time.Since(start)
	}
	// holders returns how many bucket Leases each replica holds.
	kube, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	group := fxshard.Config{Namespace: ns, Name: "fxkube"}
	holders := func() map[string]int {
		g, err := fxshard.ReadGroup(ctx, kube, group)
		require.NoError(t, err)
		out := map[string]int{}
		for _, b := range g.Buckets {
			if b.Holder != "" {
				out[b.Holder]++
			}
		}
		return out
	}
	balancedAmong := func(replicas int, msg string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			shares := slices.Sorted(func(yield func(int) bool) {
				for _, n := range holders() {
					if !yield(n) {
						return
					}
				}
			})
			want := map[int][]int{2: {8, 8}, 3: {5, 5, 6}, 4: {4, 4, 4, 4}}[replicas]
			assert.Equal(c, want, shares)
		}, 60*time.Second, 250*time.Millisecond, msg)
	}

	var procs []*process
	for i := range 3 {
		procs = append(procs, startProcess(t, bin, kubeconfig, ns, fmt.Sprintf("r%d", i)))
	}
	for _, p := range procs {
		require.Eventually(t, p.ready, 60*time.Second, 100*time.Millisecond, "%s becomes ready; its logs:\n%s", p.Name, p.Logs)
	}
	balancedAmong(3, "three replicas share the buckets")
	t.Logf("initial objects stamped in %v", stamped("initial objects"))
	churn()
	t.Logf("a round of %d updates stamped in %v", n, stamped("after a round of updates"))

	// SIGKILL: no release; the others take its buckets once its Leases
	// expire.
	before, err := fxshard.ReadGroup(ctx, kube, group)
	require.NoError(t, err)
	killed := time.Now()
	require.NoError(t, procs[2].Cmd.Process.Kill())
	assert.Error(t, <-procs[2].Exited, "killed")
	churn()
	balancedAmong(2, "the killed replica's buckets taken over")
	t.Logf("buckets taken over %v after SIGKILL", time.Since(killed))
	checkDescribe(t, bin, kubeconfig, ns, holders(), n, before.Handovers())
	stamped("after SIGKILL")
	t.Logf("the round of updates made during the take-over stamped %v after SIGKILL", time.Since(killed))

	// A new replica: the buckets even out again.
	joined := time.Now()
	procs = append(procs, startProcess(t, bin, kubeconfig, ns, "r3"))
	require.Eventually(t, procs[3].ready, 60*time.Second, 100*time.Millisecond, "r3 becomes ready; its logs:\n%s", procs[3].Logs)
	balancedAmong(3, "a new replica gets its share")
	t.Logf("a new replica had its share %v after it started", time.Since(joined))
	churn()
	stamped("after a replica joined")

	// SIGTERM: every replica stops cleanly, giving its Leases back.
	live := []*process{procs[0], procs[1], procs[3]}
	for _, p := range live {
		require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	}
	for _, p := range live {
		select {
		case err := <-p.Exited:
			assert.NoError(t, err, "%s exits 0; its logs:\n%s", p.Name, p.Logs)
		case <-time.After(60 * time.Second):
			t.Fatalf("%s still running 60s after SIGTERM; its logs:\n%s", p.Name, p.Logs)
		}
	}
	assert.Empty(t, holders(), "every bucket given back")

	// No two replicas ever stamped one ConfigMap at once.
	var all []written
	for _, p := range procs {
		all = append(all, p.written(t)...)
	}
	require.NotEmpty(t, all)
	byKey := map[string][]written{}
	by := map[string]int{}
	for _, w := range all {
		byKey[w.key] = append(byKey[w.key], w)
		by[w.replica]++
	}
	overlaps := 0
	for key, ws := range byKey {
		slices.SortFunc(ws, func(a, b written) int { return cmp.Compare(a.began, b.began) })
		for i := 1; i < len(ws); i++ {
			if ws[i].replica != ws[i-1].replica && ws[i].began < ws[i-1].ended {
				overlaps++
				t.Errorf("%s: stamped by %s from %.6f while %s stamped it until %.6f", key, ws[i].replica, ws[i].began, ws[i-1].replica, ws[i-1].ended)
			}
		}
	}
	t.Logf("%d stamps by replica: %v; %d overlaps", len(all), by, overlaps)
	for _, p := range procs {
		assert.Positive(t, by[p.Name], "%s stamped its share", p.Name)
		// Each bucket's store lists and watches its bucket when the API
		// server applies shard selectors; when it does not, each is a
		// view of one store of the whole spec, which the replica says once.
		var bucketInformers, fallback int
		for _, e := range p.logLines(t) {
			sharded := strings.Contains(e.Store, "shardRange(")
			switch {
			case e.Msg == "store started late" && sharded:
				bucketInformers++
			case strings.Contains(e.Msg, "does not apply shard selectors"):
				fallback++
				assert.False(t, sharded, "%s: the fallback is the store of the whole spec, not a bucket's: %s", p.Name, e.Store)
			}
		}
		if serverFilters {
			assert.GreaterOrEqual(t, bucketInformers, 5, "%s: each bucket's store lists and watches its bucket (5 buckets or more each)", p.Name)
			assert.Zero(t, fallback, "%s reports no fallback", p.Name)
		} else {
			assert.Zero(t, bucketInformers, "%s: no bucket's store lists and watches every object", p.Name)
			assert.Equal(t, 1, fallback, "%s says once that its buckets are views of the store of the whole spec", p.Name)
		}
	}
}
