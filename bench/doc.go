// Package bench measures fxkube against controller-runtime and plain client-go
// informers doing the same work against the same real kube-apiserver.
//
// The suite is benchmarks only; `make bench` runs it and prints one table of
// ratios (BENCHMARKS.md holds the latest). Without -bench, `go test` runs only
// cheap checks of the workload and the table, with no control plane:
//
//	go test -run '^$' -bench . -count 3 -timeout 60m ./bench
//
// Besides the shared workload (three modules asking for the same five
// specs), BenchmarkSystems runs the hosting workload at each size: one
// kubebuilder-style operator on ctrl.NewManager and hosted on fxkube with
// fxcontroller.SetupWithManager, then three of them in one process (three
// managers against one app).
//
// BenchmarkOverlap runs the overlap workload: 50 (or 5) modules asking for
// overlapping specs on 5 (or 8) kinds, on fxkube and on plain informers of
// only the specs no other covers, and reports informers, the requests of
// fxkube's pre-flight and what its start adds to those informers' sync.
//
// BenchmarkShards runs 1, 2 and 4 replicas (each a subprocess) of a
// controller sharded with fxshard over 10,000 ConfigMaps, on a control
// plane of its own with the ShardedListAndWatch feature gate on, and 2 on
// the suite's, where it is off, and reports each replica's heap, objects
// received and requests, and how long buckets take to move when a replica
// joins, stops (SIGTERM) or is killed (SIGKILL); its tables follow the
// suite's.
//
// BenchmarkPods runs workloads whose objects repeat much of what they hold:
// the Pods of 100 Deployments at 10 and 100 replicas, 5,000 Certificates of
// a typed custom kind, and the suite's objects. Each runs on fxkube with
// and without sharing, controller-runtime and plain informers, and reports
// heap per object, time to sync, CPU per watch event and reads; its table
// follows the suite's.
//
// Each system runs in a fresh subprocess (the test binary re-executed), so
// its heap, connections and start-up are measured from a clean slate and one
// system's garbage never counts against another. Store reads (Get, List) are
// measured in the benchmark process itself with testing.B.
//
// FXKUBE_BENCH_PROFILES=<dir> makes each child write a CPU profile of its
// start (until every store synced), a heap profile taken when its heap is
// measured and a CPU profile of its burst, for `go tool pprof`.
// FXKUBE_BENCH_UPDATES=<n> makes BenchmarkPods' burst update n objects
// (at most its workload's), so that a profile of it has enough samples.
package bench
