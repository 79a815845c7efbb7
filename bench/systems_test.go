package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fxkube/fxkube/internal/controlplane"
	"github.com/fxkube/fxkube/internal/testenv"
)

// Sizes of the workload: objects of each kind.
var sizes = []int{1_000, 10_000}

// The burst: the first burstUpdates ConfigMaps (or all, if fewer) are
// updated burstRounds times; each update is reconciled by two controllers
// (audit's, and web's or api's).
const (
	burstUpdates = 2_000
	burstRounds  = 3
)

// objects is the workload's objects in the control plane of this run.
var objects = population{kinds: workloadKinds}

// burstVersions hands each child versions to set that no other child set.
var burstVersions atomic.Int32

func nextVersion() int32 { return burstVersions.Add(burstRounds) - burstRounds + 2 }

// adminConfig returns the control plane's admin config as cmd/app would use
// it: client-side rate limiting off.
func adminConfig(b *testing.B) *rest.Config {
	cfg := testenv.Config(b)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// populate makes the cluster hold n objects of each kind of the shared
// workload, and of the kinds of more populations.
func populate(b *testing.B, n int, more ...*population) *kubernetes.Clientset {
	b.Helper()
	kube, err := kubernetes.NewForConfig(adminConfig(b))
	if err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	for _, p := range append([]*population{&objects}, more...) {
		if err := p.ensure(b.Context(), kube, n); err != nil {
			b.Fatal(err)
		}
	}
	if d := time.Since(began); d > time.Second {
		b.Logf("made the cluster hold %d objects of each kind in %s", n, d.Round(time.Millisecond))
	}
	return kube
}

// reportSystem reports the mean of the runs of one benchmark invocation and
// records it for the table.
func reportSystem(b *testing.B, n int, sys string, runs []*childResult) {
	b.ReportMetric(0, "ns/op")
	for name, v := range systemMetrics(runs) {
		b.ReportMetric(v, name)
		results.record(n, sys, name, v)
	}
}

// systemMetrics are the means of what the runs of one system measured.
func systemMetrics(runs []*childResult) map[string]float64 {
	mean := func(f func(*childResult) float64) float64 {
		var sum float64
		for _, r := range runs {
			sum += f(r)
		}
		return sum / float64(len(runs))
	}
	const mib = 1 << 20
	metrics := map[string]float64{
		mInformers:     mean(func(r *childResult) float64 { return float64(r.Informers) }),
		mOpenWatches:   mean(func(r *childResult) float64 { return r.Requests.OpenWatches }),
		mLists:         mean(func(r *childResult) float64 { return r.Requests.Lists }),
		mEndedWatches:  mean(func(r *childResult) float64 { return r.Requests.Watches }),
		mBuild:         mean(func(r *childResult) float64 { return ms(r.Build) }),
		mSynced:        mean(func(r *childResult) float64 { return ms(r.Synced) }),
		mSyncCPU:       mean(func(r *childResult) float64 { return ms(r.SyncCPU) }),
		mReady:         mean(func(r *childResult) float64 { return ms(r.Ready) }),
		mReconciled:    mean(func(r *childResult) float64 { return ms(r.Reconciled) }),
		mHeapInuse:     mean(func(r *childResult) float64 { return float64(r.HeapInuse) / mib }),
		mHeapAlloc:     mean(func(r *childResult) float64 { return float64(r.HeapAlloc) / mib }),
		mPreflightSent: mean(func(r *childResult) float64 { return float64(preflight(r.Sent)) }),
		mAccessReviews: mean(func(r *childResult) float64 { return float64(r.Sent[sentAccessReview]) }),
		mDiscovery:     mean(func(r *childResult) float64 { return float64(r.Sent[sentDiscovery]) }),
	}
	metrics[mHeapPerObject] = mean(func(r *childResult) float64 {
		return float64(r.HeapInuse) / 1024 / float64(max(r.held(), 1))
	})
	if runs[0].Updates > 0 {
		metrics[mHeapAfterBurst] = mean(func(r *childResult) float64 { return float64(r.HeapAfterBurst) / mib })
		metrics[mEventCPU] = mean(func(r *childResult) float64 {
			return float64(r.BurstCPU) / float64(time.Microsecond) / float64(r.Updates)
		})
		metrics[mIdleCPU] = mean(func(r *childResult) float64 { return ms(r.IdleCPU) })
		metrics[mThroughput] = mean(func(r *childResult) float64 { return float64(r.Reconciles) / r.BurstDrain.Seconds() })
		metrics[mWriteRate] = mean(func(r *childResult) float64 { return float64(r.Updates) / r.BurstWrites.Seconds() })
		metrics[mReconcileCPU] = mean(func(r *childResult) float64 {
			return float64(r.BurstCPU) / float64(time.Microsecond) / float64(r.Reconciles)
		})
	}
	if runs[0].BurstAllocated > 0 {
		metrics[mEventAlloc] = mean(func(r *childResult) float64 { return float64(r.BurstAllocated) / 1024 / float64(r.Updates) })
		metrics[mCollectionCPU] = mean(func(r *childResult) float64 { return ms(r.CollectionCPU) })
		metrics[mEventCPUSpread] = mean(func(r *childResult) float64 { return float64(r.eventCPU()) / float64(time.Microsecond) })
	}
	for name, metric := range fxkubeDetails {
		if _, ok := runs[0].Details[name]; ok {
			metrics[metric] = mean(func(r *childResult) float64 { return ms(r.Details[name]) })
		}
	}
	if _, ok := runs[0].Details["slowest informer sync"]; ok {
		metrics[mOverhead] = mean(func(r *childResult) float64 {
			return ms(r.Build + r.Details["start returned"] - r.Details["slowest informer sync"])
		})
	}
	return metrics
}

// held returns how many objects r's stores held.
func (r *childResult) held() int {
	n := 0
	for _, c := range r.Counts {
		n += c
	}
	return n
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startup is the time from building a system until its controllers may
// start: fxkube's Start returning, or every store synced.
func startup(r *childResult) time.Duration {
	if d, ok := r.Details["start returned"]; ok {
		return r.Build + d
	}
	return r.Build + r.Synced
}

// overlapReported are the metrics of the overlap workload shown on the
// benchmark's line, by system; the table has them all.
var overlapReported = []string{mInformers, mOpenWatches, mPreflightSent, mAccessReviews, mDiscovery, mBuild, mSynced, mStartup, mSyncCPU, mHeapInuse}

// reportOverlap records the runs of the overlap workload's variant v, by
// system, and what fxkube's start-up took beyond the plain informers':
// the medians, over the pairs of runs, of the differences within each pair
// in time until controllers may start and in CPU used until synced.
func reportOverlap(b *testing.B, n int, v overlapVariant, runs map[string][]*childResult) {
	b.ReportMetric(0, "ns/op")
	for sys, rs := range runs {
		metrics := systemMetrics(rs)
		var sum float64
		for _, r := range rs {
			sum += ms(startup(r))
		}
		metrics[mStartup] = sum / float64(len(rs))
		for name, x := range metrics {
			results.record(n, overlapName(v, sys), name, x)
		}
		for _, name := range overlapReported {
			b.ReportMetric(metrics[name], sys+":"+name)
		}
		if sys == fxkube {
			b.ReportMetric(metrics[mOverhead], mOverhead)
		}
	}
	fx, base := runs[fxkube], runs[plainInformers]
	wall, cpu := make([]float64, len(fx)), make([]float64, len(fx))
	for i := range fx {
		wall[i], cpu[i] = ms(startup(fx[i])-startup(base[i])), ms(fx[i].SyncCPU-base[i].SyncCPU)
		d := fx[i].Details
		b.Logf("pair %d: fxkube %.0f ms (build %.1f, Start %.0f: bound %.1f, slowest informer %.0f; beyond the sync %.1f; CPU %.0f ms), informers %.0f ms (CPU %.0f ms)",
			i+1, ms(startup(fx[i])), ms(fx[i].Build), ms(d["start returned"]), ms(d["stores started"]), ms(d["slowest informer sync"]),
			ms(startup(fx[i])-d["slowest informer sync"]), ms(fx[i].SyncCPU), ms(startup(base[i])), ms(base[i].SyncCPU))
	}
	for name, diffs := range map[string][]float64{mStartupOverhead: wall, mCPUOverhead: cpu} {
		results.record(n, overlapName(v, fxkube), name, median(diffs))
		b.ReportMetric(median(diffs), name)
	}
}

// fxkubeDetails maps fxkube's start-up timings to their metrics.
var fxkubeDetails = map[string]string{
	"stores started":        mPreflight,
	"stores started cpu":    mPreflightCPU,
	"all stores synced":     mSyncLogged,
	"start returned":        mStartReturned,
	"slowest informer sync": mInformerSync,
}

// rawSpec is one spec's objects, listed the way fxkube's stores list them:
// controller-runtime's client, protobuf for built-in kinds.
type rawSpec struct {
	name     string
	selector string
	want     int
	list     func() client.ObjectList
}

func rawSpecs(n int) []rawSpec {
	specs := []rawSpec{
		{"secrets", everything, n, func() client.ObjectList { return &corev1.SecretList{} }},
		{"deployments", everything, n, func() client.ObjectList { return &appsv1.DeploymentList{} }},
	}
	for _, v := range variants {
		specs = append(specs, rawSpec{"configmaps/" + v.name, v.selector, v.count(n), func() client.ObjectList { return &corev1.ConfigMapList{} }})
	}
	return specs
}

// benchRawList measures the floor of a store's sync: one LIST of each spec's
// objects with a warm client, one spec after another (the slowest and the
// sum) and all at once.
func benchRawList(b *testing.B, n int) {
	c, err := client.New(adminConfig(b), client.Options{Scheme: clientgoscheme.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	specs := rawSpecs(n)
	list := func(ctx context.Context, s rawSpec) (time.Duration, error) {
		began := time.Now()
		l := s.list()
		if err := c.List(ctx, l, client.MatchingLabelsSelector{Selector: mustSelector(s.selector)}); err != nil {
			return 0, err
		}
		d := time.Since(began)
		if got := meta.LenList(l); got != s.want {
			return 0, fmt.Errorf("%s: listed %d objects; want %d", s.name, got, s.want)
		}
		return d, nil
	}
	for _, s := range specs { // warm the connection and the REST mapper
		if _, err := list(b.Context(), s); err != nil {
			b.Fatal(err)
		}
	}
	var slowest, sum, together time.Duration
	for b.Loop() {
		var round time.Duration
		for _, s := range specs {
			d, err := list(b.Context(), s)
			if err != nil {
				b.Fatal(err)
			}
			round = max(round, d)
			sum += d
		}
		slowest += round
		began := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(specs))
		for i, s := range specs {
			wg.Go(func() { _, errs[i] = list(b.Context(), s) })
		}
		wg.Wait()
		together += time.Since(began)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	b.ReportMetric(0, "ns/op")
	for name, v := range map[string]float64{mRawSlowest: per(slowest), mRawSum: per(sum), mRawTogether: per(together)} {
		b.ReportMetric(v, name)
		results.record(n, rawList, name, v)
	}
}

// settle waits until this run's kube-apiserver and etcd (child processes of
// this one) are idle, so that what came before (creating objects, raw LISTs,
// the previous child) does not slow the next measurement. Idle means using
// under idleTicks of CPU per settleWindow; it gives up after settleMax.
func settle(b *testing.B) {
	b.Helper()
	const (
		settleWindow = 500 * time.Millisecond
		idleTicks    = 3 // of 1/100 s: 6% of one CPU
		settleMax    = 30 * time.Second
	)
	pids := controlPlanePIDs()
	if len(pids) == 0 {
		b.Log("settle: no kube-apiserver or etcd child process found; not waiting")
		return
	}
	deadline := time.Now().Add(settleMax)
	prev := cpuTicks(pids)
	for time.Now().Before(deadline) {
		select {
		case <-time.After(settleWindow):
		case <-b.Context().Done():
			return
		}
		now := cpuTicks(pids)
		if now-prev <= idleTicks {
			return
		}
		prev = now
	}
	b.Logf("settle: the control plane is still busy after %s; measuring anyway", settleMax)
}

// controlPlanePIDs returns the kube-apiserver and etcd processes this
// process started.
func controlPlanePIDs() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, ppid, _, ok := procStat(pid)
		if ok && ppid == os.Getpid() && (comm == controlplane.APIServer || comm == controlplane.Etcd) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cpuTicks returns the CPU time pids have used, in clock ticks.
func cpuTicks(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		if _, _, ticks, ok := procStat(pid); ok {
			sum += ticks
		}
	}
	return sum
}

// procStat reads a process's name, parent and CPU time (user + system, in
// clock ticks) from /proc/<pid>/stat.
func procStat(pid int) (comm string, ppid int, ticks int64, ok bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, false
	}
	// The name is in parentheses and may hold spaces; fields follow it.
	s := string(raw)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, 0, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return "", 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	utime, err2 := strconv.ParseInt(f[11], 10, 64)
	stime, err3 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", 0, 0, false
	}
	return s[open+1 : end], ppid, utime + stime, true
}
