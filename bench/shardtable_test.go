package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/fxkube/fxkube/fxshard"
)

// shardConfig is one of BenchmarkShards' runs: its name in shardResults,
// its column's title and its replicas.
type shardConfig struct {
	name, title string
	replicas    int
}

var shardConfigs = []shardConfig{
	{"on/1", "1 replica", 1},
	{"on/2", "2 replicas", 2},
	{"on/4", "4 replicas", 4},
	{"off/2", "2, gate off", 2},
}

// shardHeapTarget is the issue's: heap per replica ≤ 1.15/R of one
// replica's.
const shardHeapTarget = 1.15

// spread returns the lowest and highest values recorded, and how many.
func (r *recorder) spread(objects int, system, metric string) (lo, hi float64, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	vs := r.samples[sampleKey{objects, system, metric}]
	if len(vs) == 0 {
		return 0, 0, 0
	}
	return slices.Min(vs), slices.Max(vs), len(vs)
}

// metricsWith returns the names of the metrics recorded for any sharded
// configuration that start with prefix, without it, sorted.
func (r *recorder) metricsWith(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k := range r.samples {
		if name, ok := strings.CutPrefix(k.metric, prefix); ok && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// printShards writes BenchmarkShards' tables: what a replica holds, costs
// and asks of the API server by the number of replicas, and how long
// buckets take to move.
func printShards(out io.Writer, r *recorder) {
	if len(r.sizes()) == 0 {
		return
	}
	n := shardObjects
	runs := 0
	for _, c := range shardConfigs {
		_, _, k := r.spread(n, c.name, mHeapInuse)
		runs = max(runs, k)
	}
	fmt.Fprintf(out, "\nfxshard: R replicas (processes) of a controller sharded by uid over %d ConfigMaps, %d buckets, the Leases' default timings; median of %d run(s) [lowest–highest]\n",
		n, fxshard.DefaultBuckets, runs)
	fmt.Fprintf(out, "the fresh replica: the one started last, once the others shared the buckets, so that it only ever held its share\n")
	fmt.Fprintf(out, "machine: %s; load average %s now\n\n", machine(), loadAverage())

	head := []string{""}
	for _, c := range shardConfigs {
		head = append(head, c.title)
	}
	table := [][]string{append(head, "target", "met")}
	cell := func(c shardConfig, metric string, decimals int, withSpread bool) string {
		v, ok := r.median(n, c.name, metric)
		if !ok {
			return ""
		}
		s := fmt.Sprintf("%.*f", decimals, v)
		if lo, hi, k := r.spread(n, c.name, metric); withSpread && k > 1 {
			s += fmt.Sprintf(" [%.*f–%.*f]", decimals, lo, decimals, hi)
		}
		return s
	}
	line := func(label, metric string, decimals int, withSpread bool) {
		cells := []string{label}
		for _, c := range shardConfigs {
			cells = append(cells, cell(c, metric, decimals, withSpread))
		}
		table = append(table, append(cells, "", ""))
	}
	// rateLine is a line of a steady rate, left out when it is 0 in every
	// configuration.
	rateLine := func(label, metric string) {
		for _, c := range shardConfigs {
			if v, _ := r.median(n, c.name, metric); v != 0 {
				line(label, metric, 2, false)
				return
			}
		}
	}
	// ratioLine shows each configuration's median over one replica's, and
	// for each with the gate on and more than one replica whether it is
	// within the target.
	ratioLine := func(label, metric string) {
		one, okOne := r.median(n, "on/1", metric)
		cells := []string{label}
		var limits, verdicts []string
		for _, c := range shardConfigs {
			v, okv := r.median(n, c.name, metric)
			judged := c.name != "off/2" && c.replicas > 1
			if judged {
				limit := shardHeapTarget / float64(c.replicas)
				limits = append(limits, fmt.Sprintf("%.3f× (%d)", limit, c.replicas))
				verdict := "?"
				switch {
				case okOne && okv && one != 0 && v/one <= limit:
					verdict = "yes"
				case okOne && okv && one != 0:
					verdict = "**NO**"
				}
				verdicts = append(verdicts, fmt.Sprintf("%s (%d)", verdict, c.replicas))
			}
			if !okOne || !okv || one == 0 {
				cells = append(cells, "")
				continue
			}
			cells = append(cells, formatRatio(v/one))
		}
		table = append(table, append(cells, "≤ 1.15/R: "+strings.Join(limits, ", "), strings.Join(verdicts, ", ")))
	}
	section := func(title string) {
		table = append(table, append([]string{"**" + title + "**"}, make([]string, len(shardConfigs)+2)...))
	}

	section("the fresh replica")
	line("buckets held", "buckets", 0, false)
	line("objects held", "objects", 0, false)
	line("heap in use after GC (MiB)", mHeapInuse, 1, true)
	ratioLine("  ÷ one replica's", mHeapInuse)
	line("heap allocated (live) after GC (MiB)", mHeapAlloc, 1, true)
	ratioLine("  ÷ one replica's", mHeapAlloc)
	line("objects received (lists + watch events)", "received-objects", 0, false)
	line("  of which outside its buckets, dropped on the client", "outside-objects", 0, false)
	section("the others (gave buckets up to it)")
	line("heap in use after GC (MiB)", "others-"+mHeapInuse, 1, true)
	line("heap allocated (live) after GC (MiB)", "others-"+mHeapAlloc, 1, true)
	section("the fresh replica's requests, from its start until its share reconciled")
	for _, class := range r.metricsWith("start ") {
		line("  "+class, "start "+class, 0, false)
	}
	section(fmt.Sprintf("steady requests per second, over %s", shardWindow))
	for _, class := range r.metricsWith("steady ") {
		rateLine("  the fresh replica: "+class, "steady "+class)
	}
	for _, class := range r.metricsWith("all steady ") {
		rateLine("  all replicas: "+class, "all steady "+class)
	}
	for _, res := range shardResources {
		line("  WATCHes open at the API server: "+res, "open watches "+res, 0, false)
	}
	writeMarkdown(out, table)

	fmt.Fprintf(out, "\nbuckets moving (ms): median [lowest–highest] over every bucket moved in every run (n)\n\n")
	moves := [][]string{{"", "n", "median", "lowest", "highest"}}
	add := func(label, config, metric string) {
		v, ok := r.median(n, config, metric)
		if !ok {
			return
		}
		lo, hi, k := r.spread(n, config, metric)
		moves = append(moves, []string{label, fmt.Sprint(k), fmt.Sprintf("%.1f", v), fmt.Sprintf("%.1f", lo), fmt.Sprintf("%.1f", hi)})
	}
	for _, s := range []struct{ scenario, title string }{
		{"join", "a replica joins (clean hand-over)"},
		{"stop", "the replica that joined stops with SIGTERM (clean hand-over)"},
		{"crash", "a replica is killed with SIGKILL (crash)"},
	} {
		for _, c := range shardConfigs {
			if _, ok := r.median(n, c.name, s.scenario+"-gap-ms"); !ok {
				continue
			}
			gate := ""
			if c.name == "off/2" {
				gate = ", gate off"
			}
			before, after := c.replicas-1, c.replicas
			switch s.scenario {
			case "stop":
				before, after = c.replicas, c.replicas-1
			case "crash":
				before, after = c.replicas-1, c.replicas-2
			}
			moves = append(moves, []string{fmt.Sprintf("**%s: %d → %d replicas%s**", s.title, before, after, gate), "", "", "", ""})
			if s.scenario == "crash" {
				add("  SIGKILL → the new holder's first reconcile of the bucket", c.name, "crash-gap-ms")
				add("    SIGKILL → bucket taken (its Lease expired)", c.name, "crash-take-ms")
			} else {
				add("  bucket unowned (old holder's Releasing) → new holder's first reconcile", c.name, s.scenario+"-gap-ms")
				add("    drain, Lease released", c.name, s.scenario+"-drain-ms")
				add("    Lease released → taken", c.name, s.scenario+"-free-ms")
			}
			add("    taken → first reconcile (store synced)", c.name, s.scenario+"-sync-ms")
			trigger := map[string]string{"join": "new replica started", "stop": "SIGTERM", "crash": "SIGKILL"}[s.scenario]
			add("  "+trigger+" → the last bucket moved reconciled", c.name, s.scenario+"-total-ms")
			add("  buckets moved per run", c.name, s.scenario+"-moved")
		}
	}
	writeMarkdown(out, moves)
}
