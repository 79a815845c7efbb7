package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/fxkube/fxkube/internal/controlplane"
)

// Pseudo-systems in the results, besides the three systems.
const (
	rawList  = "raw-list"            // a plain client LIST per spec
	crNoCopy = "controller-runtime*" // its cached client with UnsafeDisableDeepCopy
)

// Metrics, named as benchmark units.
const (
	mInformers      = "informers"
	mOpenWatches    = "open-watches"
	mLists          = "lists"
	mEndedWatches   = "ended-watches"
	mBuild          = "build-ms"
	mSynced         = "synced-ms"
	mReady          = "ready-ms"
	mReconciled     = "reconciled-ms"
	mHeapInuse      = "heap-inuse-MiB"
	mHeapAlloc      = "heap-alloc-MiB"
	mThroughput     = "reconciles/s"
	mWriteRate      = "updates/s"
	mReconcileCPU   = "cpu-us/reconcile"
	mEventCPU       = "cpu-us/event"
	mIdleCPU        = "idle-cpu-ms/s"
	mEventAlloc     = "alloc-KiB/event"
	mCollectionCPU  = "collection-cpu-ms"
	mEventCPUSpread = "cpu-us/event-gc-spread"
	mHeapPerObject  = "heap-KiB/object"
	mHeapEmpty      = "heap-empty-MiB" // the system's with stores that hold nothing
	mHeapAfterBurst = "heap-after-burst-MiB"
	mPreflight      = "preflight-ms"
	mSyncLogged     = "all-synced-ms"
	mStartReturned  = "start-ms"
	mInformerSync   = "informer-sync-ms"
	mOverhead       = "overhead-ms"
	mRawSlowest     = "slowest-list-ms"
	mRawSum         = "sequential-lists-ms"
	mRawTogether    = "concurrent-lists-ms"
	// The overlap workload's.
	mPreflightSent   = "preflight-requests"
	mAccessReviews   = "access-reviews"
	mDiscovery       = "discovery-requests"
	mStartup         = "startup-ms"          // build until controllers may start
	mSyncCPU         = "sync-cpu-ms"         // CPU used from build until every store synced
	mPreflightCPU    = "preflight-cpu-ms"    // fxkube: CPU used from Start until the stores were bound
	mCPUOverhead     = "cpu-overhead-ms"     // fxkube's sync CPU less plain informers', by pair
	mStartupOverhead = "startup-overhead-ms" // fxkube's startup less plain informers', by pair
)

// recorder keeps every value the benchmarks measured, one per run (-count),
// for the table, which shows medians.
type recorder struct {
	mu      sync.Mutex
	samples map[sampleKey][]float64
	// loadAtStart is the load average when the benchmarks began: other
	// work on the machine skews every figure.
	loadAtStart string
}

type sampleKey struct {
	objects        int
	system, metric string
}

var results = &recorder{samples: make(map[sampleKey][]float64)}

func (r *recorder) record(objects int, system, metric string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := sampleKey{objects, system, metric}
	r.samples[k] = append(r.samples[k], v)
}

// median returns the median of the values recorded, and whether there are
// any.
func (r *recorder) median(objects int, system, metric string) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	vs := r.samples[sampleKey{objects, system, metric}]
	return median(vs), len(vs) > 0
}

// median returns the median of vs; 0 if there are none.
func median(vs []float64) float64 {
	vs = slices.Sorted(slices.Values(vs))
	switch {
	case len(vs) == 0:
		return 0
	case len(vs)%2 == 1:
		return vs[len(vs)/2]
	default:
		return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
}

// runs returns how many values were recorded for the metric at most.
func (r *recorder) runs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, vs := range r.samples {
		n = max(n, len(vs))
	}
	return n
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for k := range r.samples {
		if !slices.Contains(out, k.objects) {
			out = append(out, k.objects)
		}
	}
	slices.Sort(out)
	return out
}

// value reads one row's figure for a system.
type value func(system string) (float64, bool)

// row is one line of the table.
type row struct {
	label    string
	value    value
	decimals int
	ratios   bool   // show fxkube's ratio to the others
	target   string // what fxkube should reach, if anything
	// met reports whether the target is met, given the row's values; ok is
	// false when a figure is missing.
	met func(v value) (met, ok bool)
	// note, if set, makes the row a line of text.
	note string
}

func (r *recorder) metric(n int, metric string) value {
	return func(sys string) (float64, bool) { return r.median(n, sys, metric) }
}

// ratio is fxkube's figure over another system's.
func ratio(v value, other string) (float64, bool) { return ratioOf(v, fxkube, other) }

// ratioOf is sys's figure over other's.
func ratioOf(v value, sys, other string) (float64, bool) {
	a, ok1 := v(sys)
	b, ok2 := v(other)
	if !ok1 || !ok2 || b == 0 {
		return 0, false
	}
	return a / b, true
}

func atMost(limit float64, other string) func(value) (bool, bool) {
	return func(v value) (bool, bool) {
		r, ok := ratio(v, other)
		return ok && r <= limit, ok
	}
}

func atLeast(limit float64, other string) func(value) (bool, bool) {
	return func(v value) (bool, bool) {
		r, ok := ratio(v, other)
		return ok && r >= limit, ok
	}
}

func both(a, b func(value) (bool, bool)) func(value) (bool, bool) {
	return func(v value) (bool, bool) {
		m1, ok1 := a(v)
		m2, ok2 := b(v)
		return m1 && m2, ok1 && ok2
	}
}

// only shows a figure in one system's column.
func only(sys string, v value) value {
	return func(s string) (float64, bool) {
		if s != sys {
			return 0, false
		}
		return v(s)
	}
}

func (r *recorder) systemRows(n int) []row {
	m := func(metric string) value { return r.metric(n, metric) }
	over := func(metric, floor string) (value, float64) {
		f, ok := r.median(n, rawList, floor)
		return func(sys string) (float64, bool) {
			v, okv := r.median(n, sys, metric)
			if !ok || !okv || f == 0 {
				return 0, false
			}
			return v / f, true
		}, f
	}
	slowestRatio, slowest := over(mSynced, mRawSlowest)
	togetherRatio, together := over(mSynced, mRawTogether)
	sum, _ := r.median(n, rawList, mRawSum)
	fx := func(metric string) value { return only(fxkube, m(metric)) }
	return []row{
		{label: "informers run", value: m(mInformers), ratios: true,
			target: fmt.Sprintf("fxkube = %d broadest specs, informers = %d", broadestSpecs, distinctSpecs*consumersPerSpec),
			met: func(v value) (bool, bool) {
				f, ok1 := v(fxkube)
				p, ok2 := v(plainInformers)
				return f == broadestSpecs && p == distinctSpecs*consumersPerSpec, ok1 && ok2
			}},
		{label: "WATCH requests open at the API server", value: m(mOpenWatches), ratios: true,
			target: fmt.Sprintf("fxkube = %d, cr = %d", broadestSpecs, distinctSpecs),
			met: func(v value) (bool, bool) {
				f, ok1 := v(fxkube)
				c, ok2 := v(controllerRuntime)
				return f == broadestSpecs && c == distinctSpecs, ok1 && ok2
			}},
		{label: "LIST requests at the API server", value: m(mLists)},
		{label: "WATCH requests ended (watches re-opened)", value: m(mEndedWatches)},
		{label: "build the system, no I/O (ms)", value: m(mBuild), decimals: 1},
		{label: "start → every store synced (ms)", value: m(mSynced), ratios: true},
		{note: fmt.Sprintf("raw client LIST of each spec (floor): slowest %.0f ms; all %d one after another %.0f ms; all at once %.0f ms",
			slowest, distinctSpecs, sum, together)},
		{label: "  synced ÷ slowest raw LIST", value: slowestRatio, decimals: 2,
			target: "fxkube ≤ 1.30", met: func(v value) (bool, bool) { f, ok := v(fxkube); return f <= 1.3, ok }},
		{label: "  synced ÷ all raw LISTs at once", value: togetherRatio, decimals: 2},
		{label: "start → every controller reconciling (ms)", value: m(mReady), ratios: true},
		{label: "start → initial reconciles done (ms)", value: m(mReconciled), ratios: true},
		{label: "heap in use after sync + GC (MiB)", value: m(mHeapInuse), decimals: 1, ratios: true,
			target: "≤ 0.40× informers, ≤ 0.80× cr", met: both(atMost(0.4, plainInformers), atMost(0.8, controllerRuntime))},
		{label: "heap allocated after sync + GC (MiB)", value: m(mHeapAlloc), decimals: 1, ratios: true},
		{label: "burst: reconciles/s draining the queues", value: m(mThroughput), ratios: true,
			target: "≥ 0.95× cr", met: atLeast(0.95, controllerRuntime)},
		{label: "  CPU per reconcile, whole process (µs)", value: m(mReconcileCPU), decimals: 1, ratios: true},
		{label: "  (API server took the updates at, /s)", value: m(mWriteRate)},
		{label: "fxkube: Start → stores bound (discovery, access review) (ms)", value: fx(mPreflight), decimals: 1},
		{label: "fxkube: slowest informer, its start → synced (ms)", value: fx(mInformerSync)},
		{label: "fxkube: Start → lifecycle saw every store synced (ms)", value: fx(mSyncLogged)},
		{label: "fxkube: Start returned, controllers running (ms)", value: fx(mStartReturned)},
		{label: "fxkube: overhead = build + Start − slowest informer (ms)", value: fx(mOverhead), decimals: 1},
	}
}

// hostingRows are the rows of the hosting workload with k operators: its
// fxkube run in the fxkube column, its controller-runtime run in cr's. One
// operator is the same work on either host; k share stores on fxkube.
func (r *recorder) hostingRows(n, k int) []row {
	m := func(metric string) value {
		return func(sys string) (float64, bool) { return r.median(n, hostedName(k, sys), metric) }
	}
	heapTarget, heapMet := "≤ 1.00× cr", atMost(1, controllerRuntime)
	var shareTarget string
	var shareMet func(value) (bool, bool)
	if k > 1 {
		heapTarget, heapMet = "≤ 0.40× cr", atMost(0.4, controllerRuntime)
		shareTarget = fmt.Sprintf("fxkube = cr ÷ %d", k)
		shareMet = func(v value) (bool, bool) {
			f, ok1 := v(fxkube)
			c, ok2 := v(controllerRuntime)
			return f*float64(k) == c, ok1 && ok2
		}
	}
	rows := []row{
		{label: "informers run", value: m(mInformers), ratios: true, target: shareTarget, met: shareMet},
		{label: "WATCH requests open at the API server", value: m(mOpenWatches), ratios: true, target: shareTarget, met: shareMet},
		{label: "LIST requests at the API server", value: m(mLists)},
		{label: "WATCH requests ended (watches re-opened)", value: m(mEndedWatches)},
		{label: "start → every store synced (ms)", value: m(mSynced), ratios: true},
		{label: "start → initial reconciles done (ms)", value: m(mReconciled), ratios: true},
		{label: "heap in use after sync + GC (MiB)", value: m(mHeapInuse), decimals: 1, ratios: true, target: heapTarget, met: heapMet},
		{label: "heap allocated after sync + GC (MiB)", value: m(mHeapAlloc), decimals: 1, ratios: true},
	}
	if k > 1 {
		return rows
	}
	return append(rows,
		row{label: "burst: reconciles/s draining the queue", value: m(mThroughput), ratios: true,
			target: "≥ 0.95× cr", met: atLeast(0.95, controllerRuntime)},
		row{label: "  CPU per reconcile, whole process (µs)", value: m(mReconcileCPU), decimals: 1, ratios: true},
		row{label: "  (API server took the updates at, /s)", value: m(mWriteRate)})
}

// hostingTitle heads the section of k operators.
func hostingTitle(n, k int) string {
	if k == 1 {
		return fmt.Sprintf("N = %d, one kubebuilder-style operator: hosted on fxkube vs on ctrl.NewManager (cr)", n)
	}
	return fmt.Sprintf("N = %d, %d operators in one process: hosted on one fxkube app vs %d ctrl.NewManager (cr)", n, k, k)
}

// overlapRows are the rows of the overlap workload's variant v: its fxkube
// runs in the fxkube column, the plain informers of its broadest specs in
// the informers column.
func (r *recorder) overlapRows(n int, v overlapVariant) []row {
	m := func(metric string) value {
		return func(sys string) (float64, bool) {
			if sys == controllerRuntime {
				return 0, false
			}
			return r.median(n, overlapName(v, sys), metric)
		}
	}
	fx := func(metric string) value { return only(fxkube, m(metric)) }
	p := v.plan()
	broadest, targets := len(p.families), p.reviewTargets()
	oneEach := func(v value) (bool, bool) {
		f, ok1 := v(fxkube)
		i, ok2 := v(plainInformers)
		return f == float64(broadest) && i == float64(broadest), ok1 && ok2
	}
	// Discovery is controller-runtime's REST mapper's: /api and /apis
	// (aggregated discovery), and a group version again for each store
	// bound while those were on their way.
	discovery := row{label: "  discovery", value: fx(mDiscovery),
		target: fmt.Sprintf("2 to %d (1 + informers)", 1+broadest),
		met:    func(val value) (bool, bool) { d, ok := val(fxkube); return d >= 2 && d <= float64(1+broadest), ok }}
	return []row{
		{label: "informers run", value: m(mInformers), ratios: true,
			target: fmt.Sprintf("= %d broadest specs", broadest), met: oneEach},
		{label: "WATCH requests open at the API server", value: m(mOpenWatches), ratios: true,
			target: fmt.Sprintf("= %d", broadest), met: oneEach},
		{label: "WATCH requests ended (watches re-opened)", value: m(mEndedWatches)},
		{label: "pre-flight requests sent", value: m(mPreflightSent)},
		{label: "  SelfSubjectAccessReviews", value: fx(mAccessReviews),
			target: fmt.Sprintf("= 2 × %d (resource, namespace) reviewed", targets),
			met:    func(val value) (bool, bool) { a, ok := val(fxkube); return a == float64(2*targets), ok }},
		discovery,
		{label: "build the system, no I/O (ms)", value: m(mBuild), decimals: 1},
		{label: "start → every store synced (ms)", value: m(mSynced), ratios: true},
		{label: "fxkube: Start → stores bound (planning, discovery, access review) (ms)", value: fx(mPreflight), decimals: 1},
		{label: "fxkube: slowest informer, its start → synced (ms)", value: fx(mInformerSync)},
		{label: "fxkube: Start returned, controllers running (ms)", value: fx(mStartReturned)},
		{label: "fxkube: beyond the sync = build + Start − slowest informer (ms)", value: fx(mOverhead), decimals: 1,
			target: "< 50 ms", met: func(val value) (bool, bool) { o, ok := val(fxkube); return o < 50, ok }},
		{label: "CPU used, build → every store synced (ms)", value: m(mSyncCPU), ratios: true},
		{label: "  fxkube's CPU − informers', by pair (ms)", value: fx(mCPUOverhead), decimals: 1},
		{label: "  fxkube: of which Start → stores bound (ms)", value: fx(mPreflightCPU), decimals: 1},
		{label: "build → controllers may start (ms)", value: m(mStartup), ratios: true},
		{label: "  fxkube's time − informers', by pair (ms)", value: fx(mStartupOverhead), decimals: 1},
		{label: "heap in use after sync + GC (MiB)", value: m(mHeapInuse), decimals: 1, ratios: true},
		{label: "heap allocated after sync + GC (MiB)", value: m(mHeapAlloc), decimals: 1, ratios: true},
	}
}

// overlapTitle heads the section of the overlap workload's variant v.
func overlapTitle(n int, v overlapVariant) string {
	p := v.plan()
	return fmt.Sprintf("N = %d, overlap: %d modules on %d kinds, %d requests → %d specs → %d broadest specs on %d (resource, namespace)",
		n, v.Modules, v.Kinds, p.requests(), len(p.specs()), len(p.families), p.accessTargets())
}

// readOps are the store reads benchmarked, by the name recorded.
var readOps = []struct {
	name  string
	label func(n int) string
	get   bool
	// hosted reads compare a hosted operator's client (fxkube) with a
	// manager's (cr), both deep-copying.
	hosted bool
}{
	{"Get-ConfigMap", func(int) string { return "Get ConfigMap" }, true, false},
	{"Get-Deployment", func(int) string { return "Get Deployment" }, true, false},
	{"List-namespace", func(n int) string { return fmt.Sprintf("List a namespace's %d ConfigMaps", n/namespaces) }, false, false},
	{"List-namespace-label", func(n int) string {
		return fmt.Sprintf("List a namespace's ConfigMaps by label (%d)", n/namespaces/2)
	}, false, false},
	{"Hosted-Get-ConfigMap", func(int) string { return "hosted client: Get ConfigMap" }, true, true},
	{"Hosted-List-by-field", func(int) string { return "hosted client: List a ConfigMap's Secrets by field index (1)" }, false, true},
}

func (r *recorder) readRows(n int) []row {
	var rows []row
	noCopy := func(v value) value {
		return func(sys string) (float64, bool) {
			if sys == controllerRuntime {
				sys = crNoCopy
			}
			return v(sys)
		}
	}
	for _, op := range readOps {
		ns, allocs := r.metric(n, op.name+" ns/op"), r.metric(n, op.name+" allocs/op")
		if _, ok := ns(fxkube); !ok {
			continue
		}
		nsRow := row{label: op.label(n) + " (ns/op)", value: ns, decimals: 1, ratios: true}
		allocRow := row{label: op.label(n) + " (allocs/op)", value: allocs, ratios: true}
		if op.hosted {
			rows = append(rows, nsRow, allocRow)
			continue
		}
		if op.get {
			nsRow.target, nsRow.met = "≤ 0.02× cr (50× faster)", atMost(0.02, controllerRuntime)
			allocRow.target = "fxkube = 0"
			allocRow.met = func(v value) (bool, bool) { a, ok := v(fxkube); return a == 0, ok }
		}
		rows = append(rows, nsRow, allocRow,
			row{label: "  cr without deep copy (ns/op)", value: noCopy(ns), decimals: 1, ratios: true},
			row{label: "  cr without deep copy (allocs/op)", value: noCopy(allocs), ratios: true})
	}
	return rows
}

// print writes the table of everything recorded, as Markdown that also reads
// well in a terminal.
func (r *recorder) print(out io.Writer) {
	sizes := r.sizes()
	if len(sizes) == 0 {
		return
	}
	fmt.Fprintf(out, "\nfxkube vs controller-runtime (cr) vs plain client-go informers: median of %d run(s)\n", r.runs())
	fmt.Fprintf(out, "workload: %d modules × %d specs (ConfigMaps in 3 label-selector variants, Secrets, Deployments), %d consumers per spec; N objects of each kind\n",
		len(modules), distinctSpecs, consumersPerSpec)
	fmt.Fprintf(out, "hosting workload: k kubebuilder-style operators (For ConfigMaps, Owns Secrets, a Secret field index), each reconciling every ConfigMap; burst with one operator only\n")
	fmt.Fprintf(out, "overlap workload: modules asking for overlapping specs, no controllers (bench/overlap_test.go); its informers column: one plain informer per broadest spec\n")
	fmt.Fprintf(out, "machine: %s; load average %s at the start, %s at the end\nversions: %s\n\n",
		machine(), r.loadAtStart, loadAverage(), versions())

	table := [][]string{systemColumns.header()}
	section := func(title string, rows []row) { table = append(table, systemColumns.section(title, rows)...) }
	for _, n := range sizes {
		if _, ok := r.median(n, fxkube, mSynced); ok {
			section(fmt.Sprintf("N = %d", n), r.systemRows(n))
		}
	}
	for _, n := range sizes {
		for _, k := range operatorCounts {
			if _, ok := r.median(n, hostedName(k, fxkube), mSynced); ok {
				section(hostingTitle(n, k), r.hostingRows(n, k))
			}
		}
	}
	for _, n := range sizes {
		for _, v := range overlapVariants {
			if _, ok := r.median(n, overlapName(v, fxkube), mSynced); ok {
				section(overlapTitle(n, v), r.overlapRows(n, v))
			}
		}
	}
	for _, n := range sizes {
		if rows := r.readRows(n); len(rows) > 0 {
			section(fmt.Sprintf("store reads, N = %d (cr: cached client, deep copies by default)", n), rows)
		}
	}
	writeMarkdown(out, table)
}

// columns are a table's: a figure per system, then the ratios of one
// system's figure to another's.
type columns struct {
	systems []string
	ratios  [][2]string // system, other: system ÷ other
}

// systemColumns are the suite's table's.
var systemColumns = columns{systems: systems, ratios: [][2]string{{fxkube, controllerRuntime}, {fxkube, plainInformers}}}

// shortNames are systems' names in a table's header, where they differ.
var shortNames = map[string]string{controllerRuntime: "cr", fxkubeUnshared: "unshared", fxkubeBytes: "bytes"}

func shortName(sys string) string {
	if s, ok := shortNames[sys]; ok {
		return s
	}
	return sys
}

func (c columns) header() []string {
	h := []string{""}
	for _, sys := range c.systems {
		h = append(h, shortName(sys))
	}
	for _, r := range c.ratios {
		h = append(h, shortName(r[0])+"÷"+shortName(r[1]))
	}
	return append(h, "target", "met")
}

// section returns the lines of a section of the table: its title, then
// its rows.
func (c columns) section(title string, rows []row) [][]string {
	width := 1 + len(c.systems) + len(c.ratios) + 2
	line := func(text string) []string {
		l := make([]string, width)
		l[0] = text
		return l
	}
	out := [][]string{line("**" + title + "**")}
	for _, rw := range rows {
		if rw.note != "" {
			out = append(out, line(rw.note))
			continue
		}
		cells := []string{rw.label}
		for _, sys := range c.systems {
			cells = append(cells, formatValue(rw.value, sys, rw.decimals))
		}
		for _, r := range c.ratios {
			cell := ""
			if rw.ratios {
				if q, ok := ratioOf(rw.value, r[0], r[1]); ok {
					cell = formatRatio(q)
				}
			}
			cells = append(cells, cell)
		}
		verdict := ""
		if rw.met != nil {
			switch met, ok := rw.met(rw.value); {
			case !ok:
				verdict = "?"
			case met:
				verdict = "yes"
			default:
				verdict = "**NO**"
			}
		}
		out = append(out, append(cells, rw.target, verdict))
	}
	return out
}

// writeMarkdown writes rows as a Markdown table, padded to line up: the first
// column aligned left, the others (figures) right.
func writeMarkdown(out io.Writer, rows [][]string) {
	width := make([]int, len(rows[0]))
	for i := range width {
		width[i] = 3 // room for a separator such as ":--"
	}
	for _, cells := range rows {
		for i, c := range cells {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i == 0 || i >= len(cells)-2 {
				fmt.Fprintf(&b, "| %s%s ", c, pad)
			} else {
				fmt.Fprintf(&b, "| %s%s ", pad, c)
			}
		}
		fmt.Fprintln(out, b.String()+"|")
	}
	line(rows[0])
	sep := make([]string, len(width))
	for i, w := range width {
		if i == 0 || i >= len(width)-2 {
			sep[i] = ":" + strings.Repeat("-", w-1)
		} else {
			sep[i] = strings.Repeat("-", w-1) + ":"
		}
	}
	line(sep)
	for _, cells := range rows[1:] {
		line(cells)
	}
}

func formatValue(v value, sys string, decimals int) string {
	x, ok := v(sys)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%.*f", decimals, x)
}

// formatRatio shows three decimals, so that a ratio next to a target of 1
// shows which side of it it is.
func formatRatio(q float64) string { return fmt.Sprintf("%.3f×", q) }

// machine describes the CPUs and memory.
func machine() string {
	model, mem := "unknown CPU", "unknown memory"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		_ = f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			var kb int64
			if _, err := fmt.Sscanf(s.Text(), "MemTotal: %d kB", &kb); err == nil {
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				break
			}
		}
		_ = f.Close()
	}
	return fmt.Sprintf("%d CPUs (%s), %s", runtime.NumCPU(), model, mem)
}

// loadAverage returns the 1, 5 and 15 minute load averages.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(raw)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// versions names Go, the control plane and the client libraries (from the
// module's go.mod: test binaries carry no dependency versions).
func versions() string {
	parts := []string{runtime.Version(), "kube-apiserver " + controlplane.KubernetesVersion, "etcd " + controlplane.EtcdVersion}
	raw, err := os.ReadFile("../go.mod")
	if err != nil {
		return strings.Join(parts, ", ")
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && slices.Contains([]string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime", "go.uber.org/fx"}, f[0]) {
			parts = append(parts, f[0]+" "+f[1])
		}
	}
	return strings.Join(parts, ", ")
}
