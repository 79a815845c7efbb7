package bench

import (
	"fmt"
	"io"
)

// kindResults are BenchmarkPods', recorded by workload and system
// (kindsName) at the workload's number of objects of each kind.
var kindResults = &recorder{samples: make(map[sampleKey][]float64)}

// kindsName is what a run of workload w on sys is recorded as.
func kindsName(w kindsWorkload, sys string) string { return w.name + "/" + sys }

// kindsColumns: sharing's effect shows between fxkube's two columns.
var kindsColumns = columns{
	systems: kindsSystems,
	ratios:  [][2]string{{fxkube, controllerRuntime}, {fxkubeUnshared, controllerRuntime}, {fxkubeBytes, controllerRuntime}, {fxkube, plainInformers}},
}

// heapTargets are the targets for heap per object, by workload:
// Pods repeat much, the suite's objects little.
var heapTargets = map[string]float64{"pods-10": 0.5, "pods-100": 0.5, "objects": 1.0}

// kindsRows are the rows of workload w.
func (r *recorder) kindsRows(w kindsWorkload) []row {
	m := func(metric string) value {
		return func(sys string) (float64, bool) { return r.median(w.objects, kindsName(w, sys), metric) }
	}
	heap := row{label: "heap per object, above that (KiB)", value: m(mHeapPerObject), decimals: 2, ratios: true}
	if limit, ok := heapTargets[w.name]; ok {
		heap.target, heap.met = fmt.Sprintf("≤ %.2f× cr", limit), atMost(limit, controllerRuntime)
	}
	rows := []row{
		{label: "start → every store synced (ms)", value: m(mSynced), ratios: true,
			target: "≤ 1.15× cr", met: atMost(1.15, controllerRuntime)},
		{label: "CPU used, build → every store synced (ms)", value: m(mSyncCPU), ratios: true},
		{label: "heap in use after sync + GC (MiB)", value: m(mHeapInuse), decimals: 1, ratios: true},
		{label: "  of it, with stores that hold nothing (MiB)", value: m(mHeapEmpty), decimals: 1, ratios: true},
		heap,
		{label: fmt.Sprintf("update burst: CPU per watch event, collector off (µs), %d updates", w.burst()),
			value: m(mEventCPU), decimals: 1, ratios: true},
		{label: "  allocated per watch event (KiB)", value: m(mEventAlloc), decimals: 2, ratios: true},
		{label: "  CPU of one collection after it (ms)", value: m(mCollectionCPU), decimals: 1, ratios: true},
		{label: "  CPU per watch event, collections spread (µs)", value: m(mEventCPUSpread), decimals: 1, ratios: true,
			target: "≤ 1.25× cr", met: atMost(1.25, controllerRuntime)},
		{label: "  heap in use after it + GC (MiB)", value: m(mHeapAfterBurst), decimals: 1, ratios: true},
		{label: "  idle CPU taken out of it (ms per second)", value: m(mIdleCPU), decimals: 1},
	}
	for _, op := range kindReadOps {
		ns, allocs := m(op.name+" ns/op"), m(op.name+" allocs/op")
		if _, ok := ns(fxkube); !ok {
			continue
		}
		nsRow := row{label: op.label(w) + " (ns/op)", value: ns, decimals: 1, ratios: true}
		allocRow := row{label: op.label(w) + " (allocs/op)", value: allocs, ratios: true}
		if op.get {
			allocRow.target = "fxkube = 0"
			allocRow.met = func(v value) (bool, bool) { a, ok := v(fxkube); return a == 0, ok }
		}
		rows = append(rows, nsRow, allocRow)
	}
	return rows
}

// printKinds writes BenchmarkPods' table.
func printKinds(out io.Writer, r *recorder) {
	if len(r.sizes()) == 0 {
		return
	}
	fmt.Fprintf(out, "\nobjects that repeat: fxkube (sharing, the default), fxkube with fxstore.WithoutSharing() (unshared) and with fxstore.HeldAsBytes() (bytes) vs controller-runtime (cr) vs plain client-go informers; median of %d run(s)\n", r.runs())
	fmt.Fprintf(out, "one store per kind, one controller of the first kind; every cache strips managedFields; cr reads deep-copy\n")
	fmt.Fprintf(out, "machine: %s; load average %s now\nversions: %s\n\n", machine(), loadAverage(), versions())
	table := [][]string{kindsColumns.header()}
	for _, w := range kindsWorkloads {
		if _, ok := r.median(w.objects, kindsName(w, fxkube), mSynced); ok {
			title := fmt.Sprintf("%s: %d objects", w.title, w.objects*len(w.kinds))
			table = append(table, kindsColumns.section(title, r.kindsRows(w))...)
		}
	}
	writeMarkdown(out, table)
	for _, w := range kindsWorkloads {
		name := kindsName(w, apiServerAlone)
		stream, ok1 := r.median(w.objects, name, mServerStream)
		list, ok2 := r.median(w.objects, name, mServerList)
		if ok1 && ok2 {
			fmt.Fprintf(out, "\nthe API server alone, %s, read and not decoded (median of %d): a streamed list %.0f ms, a LIST %.0f ms\n",
				w.title, serverReads, stream, list)
		}
	}
}
