package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fxkube/fxkube/internal/testenv"
)

// The benchmarks run in the order of this file: the workload's objects are
// created as the sizes grow, so running BenchmarkReads (at the largest size)
// first would make the smaller sizes delete objects. BenchmarkOverlap runs
// at the smallest size, first.

// BenchmarkOverlap runs the overlap workload (overlap_test.go) in each
// variant, on fxkube and on plain informers of its broadest specs only,
// and reports informers, the pre-flight's requests and what fxkube's start
// adds to those informers' sync. Each run is a pair of fresh processes, one
// of each system, in turn first, so that the two see the same machine: the
// overhead is the difference within each pair.
func BenchmarkOverlap(b *testing.B) {
	const n = overlapSize
	kube := populate(b, n, &overlapExtras)
	settle(b)
	var pairs atomic.Int32
	for _, v := range overlapVariants {
		resources := v.plan().resources()
		idle, err := testenv.ScrapeAPIRequests(b.Context(), kube.RESTClient(), resources...)
		if err != nil {
			b.Fatal(err)
		}
		// The targets' variant runs more pairs: its overhead is the
		// difference of two syncs, each far longer than the target.
		pairsPerRun := 1
		if v == overlapVariants[0] {
			pairsPerRun = 3
		}
		b.Run(v.String(), func(b *testing.B) {
			runs := make(map[string][]*childResult)
			for b.Loop() {
				for range pairsPerRun {
					order := []string{fxkube, plainInformers}
					if pairs.Add(1)%2 == 0 {
						slices.Reverse(order)
					}
					for _, sys := range order {
						waitIdle(b, kube.RESTClient(), idle, resources)
						settle(b)
						runs[sys] = append(runs[sys], spawn(b, childParams{System: sys, Objects: n, Overlap: &v}))
					}
				}
			}
			reportOverlap(b, n, v, runs)
		})
	}
}

// BenchmarkSystems runs the workload on each system, each run in a fresh
// process, and reports what it cost: informers and API requests, time to
// sync and to reconcile, heap, and reconcile throughput for a burst of
// updates. "system=raw-list" is the floor: a plain client LIST of each
// spec's objects. "operators=k" runs the hosting workload at the same size:
// k kubebuilder-style operators hosted on fxkube, and on k ctrl.NewManager
// managers in one process.
func BenchmarkSystems(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			kube := populate(b, n)
			settle(b)
			b.Run("system=raw-list", func(b *testing.B) { benchRawList(b, n) })
			idle, err := testenv.ScrapeAPIRequests(b.Context(), kube.RESTClient(), workloadResources...)
			if err != nil {
				b.Fatal(err)
			}
			run := func(b *testing.B, p childParams, recordAs string) {
				var runs []*childResult
				for b.Loop() {
					waitIdle(b, kube.RESTClient(), idle, workloadResources)
					settle(b)
					p.FirstVersion = nextVersion()
					runs = append(runs, spawn(b, p))
				}
				reportSystem(b, n, recordAs, runs)
			}
			for _, sys := range systems {
				b.Run("system="+sys, func(b *testing.B) {
					run(b, childParams{System: sys, Objects: n, Burst: burstUpdates, Rounds: burstRounds}, sys)
				})
			}
			for _, ops := range operatorCounts {
				b.Run(fmt.Sprintf("operators=%d", ops), func(b *testing.B) {
					for _, sys := range hostingSystems {
						b.Run("system="+sys, func(b *testing.B) {
							p := childParams{System: sys, Operators: ops, Objects: n, Burst: burstUpdates, Rounds: hostingRounds(ops)}
							run(b, p, hostedName(ops, sys))
						})
					}
				})
			}
		})
	}
}

// BenchmarkReads measures reading one object (Get) and many (List) from each
// system's cache: fxkube's store, controller-runtime's cached client (which
// deep-copies unless told not to: crNoCopy), client-go's listers; and the
// reads of the hosting workload's reconciler, through a hosted operator's
// client and through a manager's.
func BenchmarkReads(b *testing.B) {
	const n = 10_000
	populate(b, n)
	r := startReaders(b)
	settle(b)
	keys := readKeys(n)
	ctx := context.Background()
	ns := namespaceOf(3)
	inNamespace, byLabel := n/namespaces, n/namespaces/2
	tier := map[string]string{"tier": "front"}
	count := func(got, want int, err error) error {
		if err == nil && got != want {
			err = fmt.Errorf("got %d objects; want %d", got, want)
		}
		return err
	}

	getConfigMap := func(c client.Reader) func(int) error {
		return func(i int) error {
			var cm corev1.ConfigMap
			return c.Get(ctx, keys[i&1023], &cm)
		}
	}
	listSecrets := func(c client.Reader) func(int) error {
		return func(i int) error {
			k := keys[i&1023]
			var l corev1.SecretList
			err := c.List(ctx, &l, client.InNamespace(k.Namespace), client.MatchingFields{secretConfigMapKey: k.Name})
			return count(len(l.Items), 1, err)
		}
	}

	ops := map[string]map[string]func(i int) error{
		"Get-ConfigMap": {
			fxkube: func(i int) error {
				k := keys[i&1023]
				_, err := r.configMaps.Get(k.Namespace, k.Name)
				return err
			},
			controllerRuntime: func(i int) error {
				var cm corev1.ConfigMap
				return r.cr.Get(ctx, keys[i&1023], &cm)
			},
			crNoCopy: func(i int) error {
				var cm corev1.ConfigMap
				return r.cr.Get(ctx, keys[i&1023], &cm, client.UnsafeDisableDeepCopy)
			},
			plainInformers: func(i int) error {
				k := keys[i&1023]
				_, err := r.configMapLister.ConfigMaps(k.Namespace).Get(k.Name)
				return err
			},
		},
		"Get-Deployment": {
			fxkube: func(i int) error {
				k := keys[i&1023]
				_, err := r.deployments.Get(k.Namespace, k.Name)
				return err
			},
			controllerRuntime: func(i int) error {
				var d appsv1.Deployment
				return r.cr.Get(ctx, keys[i&1023], &d)
			},
			crNoCopy: func(i int) error {
				var d appsv1.Deployment
				return r.cr.Get(ctx, keys[i&1023], &d, client.UnsafeDisableDeepCopy)
			},
			plainInformers: func(i int) error {
				k := keys[i&1023]
				_, err := r.deploymentLister.Deployments(k.Namespace).Get(k.Name)
				return err
			},
		},
		"List-namespace": {
			fxkube: func(int) error {
				l, err := r.configMaps.List(client.InNamespace(ns))
				return count(len(l), inNamespace, err)
			},
			controllerRuntime: func(int) error {
				var l corev1.ConfigMapList
				err := r.cr.List(ctx, &l, client.InNamespace(ns))
				return count(len(l.Items), inNamespace, err)
			},
			crNoCopy: func(int) error {
				var l corev1.ConfigMapList
				err := r.cr.List(ctx, &l, client.InNamespace(ns), client.UnsafeDisableDeepCopy)
				return count(len(l.Items), inNamespace, err)
			},
			plainInformers: func(int) error {
				l, err := r.configMapLister.ConfigMaps(ns).List(labels.Everything())
				return count(len(l), inNamespace, err)
			},
		},
		"List-namespace-label": {
			fxkube: func(int) error {
				l, err := r.configMaps.List(client.InNamespace(ns), client.MatchingLabels(tier))
				return count(len(l), byLabel, err)
			},
			controllerRuntime: func(int) error {
				var l corev1.ConfigMapList
				err := r.cr.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels(tier))
				return count(len(l.Items), byLabel, err)
			},
			crNoCopy: func(int) error {
				var l corev1.ConfigMapList
				err := r.cr.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels(tier), client.UnsafeDisableDeepCopy)
				return count(len(l.Items), byLabel, err)
			},
			plainInformers: func(int) error {
				l, err := r.configMapLister.ConfigMaps(ns).List(labels.SelectorFromSet(tier))
				return count(len(l), byLabel, err)
			},
		},
		// What a hosted operator's reconciler reads (ConfigMapReconciler),
		// through its client (fxkube) and a manager's (cr); both deep-copy.
		"Hosted-Get-ConfigMap": {fxkube: getConfigMap(r.hosted), controllerRuntime: getConfigMap(r.cr)},
		"Hosted-List-by-field": {fxkube: listSecrets(r.hosted), controllerRuntime: listSecrets(r.cr)},
	}
	for _, op := range readOps {
		for _, sys := range []string{fxkube, controllerRuntime, crNoCopy, plainInformers} {
			read, ok := ops[op.name][sys]
			if !ok {
				continue
			}
			name := sys
			if sys == crNoCopy {
				name = "controller-runtime-nocopy"
			}
			b.Run(fmt.Sprintf("objects=%d/op=%s/system=%s", n, op.name, name), func(b *testing.B) {
				benchRead(b, results, n, sys, op.name, read)
			})
		}
	}
}

// BenchmarkPods runs the kinds workloads (pods_test.go): Pods of 100
// Deployments at 10 and 100 replicas, Certificates (a typed custom kind)
// and the suite's ConfigMaps, Secrets and Deployments. Each runs on
// fxkube, fxkube without sharing, controller-runtime and plain informers,
// each run a fresh process; then each system's Get and List run here.
// Its table follows the suite's.
func BenchmarkPods(b *testing.B) {
	cfg := adminConfig(b)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	_, err = envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		CRDs: []*apiextensionsv1.CustomResourceDefinition{certificateCRD.DeepCopy()}, MaxTime: time.Minute,
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range kindsWorkloads {
		b.Run(w.name, func(b *testing.B) {
			began := time.Now()
			if err := w.made.ensure(b.Context(), kube, w.objects); err != nil {
				b.Fatal(err)
			}
			b.Logf("made the cluster hold %d objects of each kind in %s", w.objects, time.Since(began).Round(time.Millisecond))
			settle(b)
			wl := w.workload()
			idle, err := testenv.ScrapeAPIRequests(b.Context(), kube.RESTClient(), wl.resources...)
			if err != nil {
				b.Fatal(err)
			}
			// Each system's rounds alternate with the others': a system
			// run first after the workload is made, or always in the same
			// place, would take the machine's trends as its own.
			k := w.kinds[0]
			systems := selectedSystems(flagValue("test.bench"), w.name)
			type round struct{ run, empty *childResult }
			rounds := make(map[string][]round, len(systems))
			for range benchCount() {
				for _, sys := range systems {
					waitIdle(b, kube.RESTClient(), idle, wl.resources)
					settle(b)
					empty := spawn(b, childParams{System: sys, Kinds: w.name, Empty: true})
					waitIdle(b, kube.RESTClient(), idle, wl.resources)
					settle(b)
					p := childParams{System: sys, Kinds: w.name, Objects: w.objects, Received: w.burst(), FirstVersion: nextVersion()}
					run := spawn(b, p, func(ctx context.Context) error {
						return parallel(ctx, 0, p.Received, patchWorkers, func(ctx context.Context, i int) error {
							return k.update(ctx, kube, i, p.FirstVersion)
						})
					})
					rounds[sys] = append(rounds[sys], round{run, empty})
				}
			}
			for _, sys := range kindsSystems {
				b.Run("system="+sys, func(b *testing.B) {
					// -count calls this once per round, in turn.
					if len(rounds[sys]) == 0 {
						b.Fatalf("no round of %s left: this benchmark runs as many rounds as -count asks, of the systems -bench selects", sys)
					}
					r := rounds[sys][0]
					rounds[sys] = rounds[sys][1:]
					// The rounds ran above. With b.Loop this is called once
					// per -count, and not again for a longer benchtime.
					for b.Loop() {
					}
					b.ReportMetric(0, "ns/op")
					runs := []*childResult{r.run}
					metrics := systemMetrics(runs)
					metrics[mHeapEmpty], metrics[mHeapPerObject] = heapAboveEmpty(runs, []*childResult{r.empty})
					for name, v := range metrics {
						b.ReportMetric(v, name)
						kindResults.record(w.objects, kindsName(w, sys), name, v)
					}
				})
			}
			b.Run("system="+apiServerAlone, func(b *testing.B) { benchServerReads(b, kube, w) })
			benchKindReads(b, w)
		})
	}
}

// benchCount is -count: how many rounds of each system BenchmarkPods runs.
// updatesEnv, when set, is how many objects BenchmarkPods updates in
// its burst, at most its workload's objects: a longer burst gives a CPU
// profile more samples.
const updatesEnv = "FXKUBE_BENCH_UPDATES"

// burst returns how many objects w's burst updates.
func (w kindsWorkload) burst() int {
	if n, err := strconv.Atoi(os.Getenv(updatesEnv)); err == nil && n > 0 {
		return min(n, w.objects)
	}
	return w.updates
}

func benchCount() int {
	if n, err := strconv.Atoi(flagValue("test.count")); err == nil && n > 0 {
		return n
	}
	return 1
}

// flagValue returns the value of the flag named, or "" if there is none.
func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

// selectedSystems returns the systems whose runs of workload w the -bench
// pattern selects, matching BenchmarkPods/w/system=sys as the testing
// package does: each alternative of the pattern, level by level.
func selectedSystems(pattern, w string) []string {
	var selected []string
	for _, sys := range kindsSystems {
		name := []string{"BenchmarkPods", w, "system=" + sys}
		if slices.ContainsFunc(splitPattern(pattern), func(levels []string) bool { return matchesLevels(levels, name) }) {
			selected = append(selected, sys)
		}
	}
	return selected
}

// matchesLevels reports whether each level of name matches its pattern;
// levels the pattern leaves out match.
func matchesLevels(levels, name []string) bool {
	for i, part := range name {
		if i >= len(levels) {
			return true
		}
		if ok, err := regexp.MatchString(levels[i], part); err != nil || !ok {
			return false
		}
	}
	return true
}

// splitPattern splits a -bench pattern into its alternatives at the top
// level's bars, and each into levels at its slashes, outside brackets and
// parentheses, as the testing package does.
func splitPattern(pattern string) [][]string {
	var (
		alternatives [][]string
		levels       []string
		brackets     int
		parens       int
		start        int
	)
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '[':
			brackets++
		case ']':
			brackets = max(brackets-1, 0)
		case '(':
			if brackets == 0 {
				parens++
			}
		case ')':
			if brackets == 0 {
				parens--
			}
		case '\\':
			i++
		case '/', '|':
			if brackets == 0 && parens == 0 {
				levels = append(levels, pattern[start:i])
				start = i + 1
				if pattern[i] == '|' {
					alternatives, levels = append(alternatives, levels), nil
				}
			}
		}
	}
	return append(alternatives, append(levels, pattern[start:]))
}
