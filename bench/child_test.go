package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fxkube/fxkube/internal/testenv"
)

// system is one way of running the workload's stores and controllers.
// Constructing one does as little I/O as the system allows.
type system interface {
	// start starts stores and controllers in the background.
	start(ctx context.Context)
	// synced reports whether every store has synced, or why it never will.
	synced() (bool, error)
	// counts returns how many objects each spec's store holds.
	counts() (map[string]int, error)
	// informers returns how many informers the system runs.
	informers() int
	// details returns extra start-up timings, if the system has any.
	details(ctx context.Context) (map[string]time.Duration, error)
	stop(ctx context.Context) error
}

// The systems, in table order.
const (
	fxkube            = "fxkube"
	controllerRuntime = "controller-runtime"
	plainInformers    = "informers"
)

var systems = []string{fxkube, controllerRuntime, plainInformers}

var newSystem = map[string]func(*rest.Config, *harness) (system, error){
	fxkube:            newFxkube,
	controllerRuntime: newControllerRuntime,
	plainInformers:    newInformers,
}

// A child is this test binary run again to measure one system; these
// variables tell it what to do and where to write the result.
const (
	childEnv  = "FXKUBE_BENCH_CHILD"
	resultEnv = "FXKUBE_BENCH_RESULT"
	// readyEnv names the file a child creates when it waits for the
	// updates the benchmark process writes (childParams.Received).
	readyEnv = "FXKUBE_BENCH_READY"
	// profileEnv, when set, names a directory where each child writes a
	// CPU profile from start until every store synced, and a heap profile
	// taken when it measures its heap: to see where the time and memory go.
	profileEnv = "FXKUBE_BENCH_PROFILES"
)

type childParams struct {
	System string `json:"system"`
	// Operators, when set, runs that many kubebuilder-style operators (the
	// hosting workload) instead of the shared workload.
	Operators int `json:"operators,omitempty"`
	// Overlap, when set, runs the overlap workload of that variant.
	Overlap *overlapVariant `json:"overlap,omitempty"`
	// Kinds, when set, names the kinds workload to run (BenchmarkPods).
	Kinds string `json:"kinds,omitempty"`
	// Empty runs the kinds workload's stores on a selector that selects
	// nothing: the heap the system takes with no objects.
	Empty   bool `json:"empty,omitempty"`
	Objects int  `json:"objects"`
	Burst   int  `json:"burst"`  // ConfigMaps updated per round
	Rounds  int  `json:"rounds"` // rounds of updates; none: no burst
	// Received is how many objects the benchmark process updates to
	// FirstVersion once the child is ready: the child only receives them.
	Received int `json:"received,omitempty"`
	// FirstVersion is the version the first round sets, the next rounds
	// counting up; no earlier run may have set it.
	FirstVersion int32 `json:"firstVersion"`
}

// profile names the profile of p's run of a kind ("cpu", "heap").
func (p childParams) profile(kind string) string {
	if p.Overlap != nil {
		return fmt.Sprintf("%s-%d-overlap-%d-%d.%s", p.System, p.Objects, p.Overlap.Modules, p.Overlap.Kinds, kind)
	}
	if p.Operators > 0 {
		return fmt.Sprintf("%s-%d-operators-%d.%s", p.System, p.Objects, p.Operators, kind)
	}
	if p.Kinds != "" && p.Empty {
		return fmt.Sprintf("%s-%s-empty.%s", p.System, p.Kinds, kind)
	}
	if p.Kinds != "" {
		return fmt.Sprintf("%s-%s.%s", p.System, p.Kinds, kind)
	}
	return fmt.Sprintf("%s-%d.%s", p.System, p.Objects, kind)
}

func (p childParams) workload() (workload, error) {
	switch {
	case p.Overlap != nil:
		return p.Overlap.workload(p.System), nil
	case p.Operators > 0:
		return hosting(p.Operators), nil
	case p.Kinds != "":
		w, ok := kindsWorkloadNamed(p.Kinds)
		if !ok {
			return workload{}, fmt.Errorf("no kinds workload %q", p.Kinds)
		}
		if p.Empty {
			w = w.selectingNothing()
		}
		return w.workload(), nil
	}
	return shared, nil
}

// childResult is what one child measured.
type childResult struct {
	Informers  int                 `json:"informers"` // as the system counts them
	Requests   testenv.APIRequests `json:"requests"`  // from its start to its initial reconciles done
	Sent       map[string]int      `json:"sent"`      // requests the system sent until then, by requestClass
	Build      time.Duration       `json:"build"`     // constructing the system
	Synced     time.Duration       `json:"synced"`    // start until every store synced
	SyncCPU    time.Duration       `json:"syncCPU"`   // CPU the process used from build until then
	Ready      time.Duration       `json:"ready"`     // start until every controller reconciled once
	Reconciled time.Duration       `json:"reconciled"`
	HeapInuse  int64               `json:"heapInuse"` // after the initial reconciles and GC, above the baseline
	// HeapAfterBurst is the same once the updates received are reconciled.
	HeapAfterBurst int64         `json:"heapAfterBurst,omitempty"`
	HeapAlloc      int64         `json:"heapAlloc"`
	Updates        int           `json:"updates"`     // written in the bursts
	Reconciles     int           `json:"reconciles"`  // in the bursts
	BurstDrain     time.Duration `json:"burstDrain"`  // time to drain them, summed over rounds
	BurstCPU       time.Duration `json:"burstCPU"`    // CPU time the process used draining them
	BurstWrites    time.Duration `json:"burstWrites"` // time the API server took the updates
	IdleCPU        time.Duration `json:"idleCPU"`     // CPU used per second waiting, before receiving
	// BurstAllocated is what the updates received allocated, in a burst
	// that ran with the collector off.
	BurstAllocated int64 `json:"burstAllocated,omitempty"`
	// CollectionCPU is the CPU one collection after the burst took, and
	// CollectionRunway the bytes the program may allocate before the
	// next: together, the collector's cost per byte allocated.
	CollectionCPU    time.Duration            `json:"collectionCPU,omitempty"`
	CollectionRunway int64                    `json:"collectionRunway,omitempty"`
	Counts           map[string]int           `json:"counts"`
	Details          map[string]time.Duration `json:"details,omitempty"`
}

// runChild measures the system params names and writes the result where
// resultEnv says. It returns the process's exit code.
func runChild(params string) int {
	var p childParams
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		fmt.Fprintf(os.Stderr, "bench child: %s: %v\n", childEnv, err)
		return 2
	}
	// A run at 10,000 objects takes seconds; a stuck one fails, naming the
	// phase it was in.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := measure(ctx, p)
	if err == nil {
		var out []byte
		out, err = json.Marshal(res)
		if err == nil {
			err = os.WriteFile(os.Getenv(resultEnv), out, 0o600)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child %s, %d objects: %v\n", p.System, p.Objects, err)
		return 1
	}
	return 0
}

// pollEvery is how often the harness checks a condition of the process. It
// is far below the times measured and costs next to nothing.
const pollEvery = time.Millisecond

func poll(ctx context.Context, what string, every time.Duration, cond func() (bool, error)) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		}
	}
}

// heapNow returns the heap in use and allocated after two full collections.
func heapNow() (inuse, alloc int64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse), int64(ms.HeapAlloc)
}

func measure(ctx context.Context, p childParams) (*childResult, error) {
	w, err := p.workload()
	if err != nil {
		return nil, err
	}
	newSys, ok := w.systems[p.System]
	if !ok {
		return nil, fmt.Errorf("no system %q", p.System)
	}
	// Logs cost the same in every system; drop them.
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	// As cmd/app loads it: KUBECONFIG, client-side rate limits off.
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	h := newHarness(w.controllers, p.Objects)
	for _, t := range h.trackers {
		t.expect(anyVersion, t.module.primary.count(p.Objects))
	}
	res := &childResult{}
	before, err := testenv.ScrapeAPIRequests(ctx, kube.RESTClient(), w.resources...)
	if err != nil {
		return nil, err
	}
	sent := &requestCounter{}
	sysCfg := rest.CopyConfig(cfg)
	sysCfg.Wrap(sent.wrap)

	baseInuse, baseAlloc := heapNow()
	began, cpu := time.Now(), processCPU()
	sys, err := newSys(sysCfg, h)
	if err != nil {
		return nil, fmt.Errorf("build: %w", err)
	}
	res.Build = time.Since(began)

	profiles := os.Getenv(profileEnv)
	stopCPUProfile := func() {}
	if profiles != "" {
		if stopCPUProfile, err = startCPUProfile(filepath.Join(profiles, p.profile("cpu"))); err != nil {
			return nil, err
		}
	}
	began = time.Now()
	sys.start(ctx)
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := sys.stop(stopCtx); err != nil {
			fmt.Fprintf(os.Stderr, "bench child: stop %s: %v\n", p.System, err)
		}
	}()
	if err := poll(ctx, "wait for stores to sync", pollEvery, sys.synced); err != nil {
		return nil, err
	}
	res.Synced, res.SyncCPU = time.Since(began), processCPU()-cpu
	stopCPUProfile()
	for _, t := range h.trackers {
		if err := t.waitDone(ctx); err != nil {
			return nil, fmt.Errorf("initial reconciles: %w", err)
		}
		res.Reconciled = max(res.Reconciled, time.Unix(0, t.doneAt.Load()).Sub(began))
		res.Ready = max(res.Ready, time.Unix(0, t.first.Load()).Sub(began))
	}

	inuse, alloc := heapNow()
	res.HeapInuse, res.HeapAlloc = inuse-baseInuse, alloc-baseAlloc
	if profiles != "" {
		if err := writeHeapProfile(filepath.Join(profiles, p.profile("heap"))); err != nil {
			return nil, err
		}
	}
	res.Informers = sys.informers()
	if res.Counts, err = sys.counts(); err != nil {
		return nil, err
	}
	if err := checkCounts(res.Counts, w.stores(p.Objects)); err != nil {
		return nil, err
	}
	after, err := testenv.ScrapeAPIRequests(ctx, kube.RESTClient(), w.resources...)
	if err != nil {
		return nil, err
	}
	res.Requests, res.Sent = after.Minus(before), sent.counts()
	if res.Details, err = sys.details(ctx); err != nil {
		return nil, err
	}
	if profiles != "" && (p.Rounds > 0 || p.Received > 0) {
		if stopCPUProfile, err = startCPUProfile(filepath.Join(profiles, p.profile("burst.cpu"))); err != nil {
			return nil, err
		}
		defer stopCPUProfile()
	}
	if err := burst(ctx, kube, h, p, res); err != nil {
		return nil, err
	}
	if p.Received > 0 {
		if err := receive(ctx, h, p, res); err != nil {
			return nil, err
		}
		inuse, _ := heapNow()
		res.HeapAfterBurst = inuse - baseInuse
	}
	return res, nil
}

// idleWindow is how long receive measures the CPU the process uses while
// it waits for nothing, idleWindows times: the least is taken.
const (
	idleWindow  = time.Second
	idleWindows = 3
)

// receive tells the benchmark process it is ready for its updates and
// measures the CPU this process uses until the controllers have
// reconciled every one: decoding the events, taking them into the
// stores and reconciling. The benchmark process sends them, so sending
// costs nothing here. What the process uses when idle (timers, the
// runtime, the system's housekeeping) over as long is taken out: the
// API server takes the updates slowly on a small machine. The idle rate
// is the least of a few windows: one that a garbage collection of the
// sync's garbage falls in is no steady rate.
//
// The burst runs with the collector off, so its CPU is the program's
// own. The collector's part is measured apart, as the CPU of one
// collection afterwards (see eventCPU). The runtime's own account of
// its collector's CPU is no use here: it counts the time its idle mark
// workers were scheduled, as if each had a CPU of its own, while the API
// server shares the machine's CPUs.
func receive(ctx context.Context, h *harness, p childParams, res *childResult) error {
	for _, t := range h.trackers {
		t.expect(p.FirstVersion, p.Received)
	}
	// Collect the garbage of what came before: cr's count of its objects
	// deep-copies them all. A collection in the burst is then its own.
	runtime.GC()
	for i := range idleWindows {
		cpu := processCPU()
		select {
		case <-time.After(idleWindow):
		case <-ctx.Done():
			return ctx.Err()
		}
		if idle := (processCPU() - cpu) * time.Second / idleWindow; i == 0 || idle < res.IdleCPU {
			res.IdleCPU = idle
		}
	}
	gcPercent := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(gcPercent)
	began, cpu, allocated := time.Now(), processCPU(), readGC().allocated
	if err := os.WriteFile(os.Getenv(readyEnv), nil, 0o600); err != nil {
		return err
	}
	for _, t := range h.trackers {
		if err := t.waitDone(ctx); err != nil {
			return fmt.Errorf("updates received: %w", err)
		}
		res.Reconciles += p.Received
	}
	res.BurstDrain = time.Since(began)
	res.BurstCPU = processCPU() - cpu - time.Duration(float64(res.IdleCPU)*res.BurstDrain.Seconds())
	res.Updates = p.Received
	res.BurstAllocated = int64(readGC().allocated - allocated)
	debug.SetGCPercent(gcPercent)
	cpu = processCPU()
	runtime.GC()
	res.CollectionCPU = processCPU() - cpu
	after := readGC()
	res.CollectionRunway = int64(after.goal) - int64(after.live)
	return nil
}

// eventCPU is the CPU a watch event costs the process in the long run:
// what the burst took with the collector off, and the collector's cost
// spread over the bytes allocated. A smaller heap collects more often,
// each collection cheaper. A collection comes once the program
// allocated its runway, so its cost per byte is steady.
func (r *childResult) eventCPU() time.Duration {
	collector := float64(r.CollectionCPU) * float64(r.BurstAllocated) / float64(max(r.CollectionRunway, 1))
	return (r.BurstCPU + time.Duration(collector)) / time.Duration(max(r.Updates, 1))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// gcCounts is the runtime's count of the bytes allocated, and of the
// heap the collector left.
type gcCounts struct {
	allocated  uint64
	live, goal uint64 // the heap marked live by the last collection, and the next one's goal
}

func readGC() gcCounts {
	s := []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/heap/goal:bytes"},
	}
	metrics.Read(s)
	return gcCounts{allocated: s[0].Value.Uint64(), live: s[1].Value.Uint64(), goal: s[2].Value.Uint64()}
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(pprof.Lookup("heap").WriteTo(f, 0), f.Close())
}

// checkCounts fails unless every store holds exactly what its spec selects.
func checkCounts(got, want map[string]int) error {
	if !maps.Equal(got, want) {
		return fmt.Errorf("stores hold %v objects; want %v", got, want)
	}
	return nil
}

// patchWorkers is how many goroutines send the burst's updates.
const patchWorkers = 16

// burst updates the first p.Burst ConfigMaps, p.Rounds times, behind the
// harness's gate, then opens it and times how long the controllers take to
// reconcile every update.
func burst(ctx context.Context, kube kubernetes.Interface, h *harness, p childParams, res *childResult) error {
	n := min(p.Burst, p.Objects)
	for round := range p.Rounds {
		version := p.FirstVersion + int32(round)
		want := 0
		for _, t := range h.trackers {
			c := t.module.primary.count(n)
			t.expect(version, c)
			want += c
		}
		gate := make(chan struct{})
		h.gate.Store(&gate)
		patch := dataVersion(version)
		began := time.Now()
		err := parallel(ctx, 0, n, patchWorkers, func(ctx context.Context, i int) error {
			_, err := kube.CoreV1().ConfigMaps(namespaceOf(i)).Patch(ctx, nameOf(i), types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
		if err != nil {
			close(gate)
			h.gate.Store(nil)
			return fmt.Errorf("burst round %d: %w", round, err)
		}
		res.BurstWrites += time.Since(began)
		err = poll(ctx, "wait for the burst to be queued", pollEvery, func() (bool, error) {
			for _, t := range h.trackers {
				if t.enqueued.Load() < int64(t.module.primary.count(n)) {
					return false, nil
				}
			}
			return true, nil
		})
		opened, cpu := time.Now(), processCPU()
		close(gate)
		h.gate.Store(nil)
		if err != nil {
			return err
		}
		var last int64
		for _, t := range h.trackers {
			if err := t.waitDone(ctx); err != nil {
				return fmt.Errorf("burst round %d: %w", round, err)
			}
			last = max(last, t.doneAt.Load())
		}
		res.BurstDrain += time.Unix(0, last).Sub(opened)
		res.BurstCPU += processCPU() - cpu
		res.Updates += n
		res.Reconciles += want
	}
	return nil
}

// processCPU returns the CPU time (user and system) this process has used:
// unlike a drain's wall time, it hardly moves with other load on the
// machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spawn runs a child measuring p against the running control plane and
// returns its result. When p.Received is set, write sends the child's
// updates once it is ready for them.
func spawn(b *testing.B, p childParams, write ...func(ctx context.Context) error) *childResult {
	b.Helper()
	params, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	out, ready := filepath.Join(dir, "result.json"), filepath.Join(dir, "ready")
	cmd := exec.CommandContext(b.Context(), os.Args[0], "-test.run=^$")
	cmd.Env = append(slices.Clone(os.Environ()),
		childEnv+"="+string(params),
		resultEnv+"="+out,
		readyEnv+"="+ready,
		"KUBECONFIG="+testenv.KubeconfigPath(b),
	)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for _, w := range write {
		err := poll(b.Context(), "wait for the child to be ready", 10*time.Millisecond, func() (bool, error) {
			select {
			case err := <-exited:
				exited <- err
				return false, fmt.Errorf("child exited: %w", err)
			default:
			}
			_, err := os.Stat(ready)
			return err == nil, nil
		})
		if err == nil {
			err = w(b.Context())
		}
		if err != nil {
			b.Fatalf("%s: %v\n%s", cmd, err, output.String())
		}
	}
	if err := <-exited; err != nil {
		b.Fatalf("%s: %v\n%s", cmd, err, output.String())
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		b.Fatal(err)
	}
	var res childResult
	if err := json.Unmarshal(raw, &res); err != nil {
		b.Fatal(err)
	}
	return &res
}

// waitIdle waits until the API server has closed the watches of earlier
// children on resources, so the next one's counts start from a quiet
// server.
func waitIdle(b *testing.B, rc rest.Interface, idle testenv.APIRequests, resources []string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	err := poll(ctx, "wait for earlier watches to close", 50*time.Millisecond, func() (bool, error) {
		now, err := testenv.ScrapeAPIRequests(ctx, rc, resources...)
		return err == nil && now.OpenWatches <= idle.OpenWatches, err
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}
}
