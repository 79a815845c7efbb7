package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"k8s.io/apimachinery/pkg/labels"
)

// These checks of the sharded workload need no API server either.

func TestReplicaAppBuilds(t *testing.T) {
	r := newReplica(replicaParams{Identity: "a", Namespace: shardNamespace, Objects: 10}, &lineWriter{w: io.Discard})
	sys, err := newFxkubeApp(offline, func(map[string]store) []fx.Option { return r.options() })
	require.NoError(t, err)
	require.NotNil(t, r.store, "the sharded store is asked for when the app is built")
	assert.Empty(t, r.store.Buckets(), "and holds no bucket before the Coordinator takes one")
	assert.Empty(t, sys.registry.Stores(), "no store is registered until a bucket is taken")
	cm := shardConfigMap(7)
	assert.Equal(t, shardNamespace, cm.Namespace)
	assert.True(t, mustSelector(shardSelector).Matches(labels.Set(cm.Labels)))
	assert.False(t, mustSelector(all.selector).Matches(labels.Set(cm.Labels)), "no spec of the suite's workload selects it")
}

func TestFairShareOf(t *testing.T) {
	members := []string{"c", "a", "b"}
	assert.Equal(t, 6, fairShareOf(16, members, "a"))
	assert.Equal(t, 5, fairShareOf(16, members, "b"))
	assert.Equal(t, 5, fairShareOf(16, members, "c"))
	assert.Equal(t, 4, fairShareOf(16, []string{"a", "b", "c", "d"}, "d"))
	assert.Equal(t, 16, fairShareOf(16, []string{"a"}, "a"))
}

func TestShardRequestClass(t *testing.T) {
	tests := []struct {
		method, url string
		want        string
	}{
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases?labelSelector=x&watch=true", "leases WATCH"},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases?labelSelector=x", "leases LIST"},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/bench-bucket-3", "leases GET"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/bench-bucket-3", "leases UPDATE"},
		{"POST", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", "leases CREATE"},
		{"DELETE", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/bench-member-a", "leases DELETE"},
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=true&sendInitialEvents=true", "configmaps WATCH"},
		{"GET", "/api/v1/configmaps", "configmaps LIST"},
		{"GET", "/api/v1/namespaces/ns", "namespaces GET"},
		{"GET", "/apis/apps/v1", sentDiscovery},
		{"POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", sentAccessReview},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, tt.url, nil)
		assert.Equal(t, tt.want, shardRequestClass(req), "%s %s", tt.method, tt.url)
	}
}

func TestMoves(t *testing.T) {
	ev := func(replica, event string, bucket int, at int64) replicaLine {
		return replicaLine{Replica: replica, Event: event, Bucket: bucket, At: at}
	}
	taken := func(replica string, bucket int, at int64, from string) replicaLine {
		l := ev(replica, evAcquired, bucket, at)
		l.From = from
		return l
	}
	events := []replicaLine{
		// Before: a held 1 and 2, then b took 2 from it.
		ev("a", evReleasing, 2, 5), ev("a", evReleased, 2, 6), taken("b", 2, 7, ""), ev("b", evServing, 2, 8),
		// A clean hand-over of 1 from a to c; a logs its release after c took it.
		ev("a", evReleasing, 1, 10), taken("c", 1, 12, ""), ev("a", evReleased, 1, 13), ev("c", evServing, 1, 20),
		// b is killed at 30; c takes 2 from it once its Lease expires.
		taken("c", 2, 45, "b"), ev("c", evServing, 2, 47),
		// c takes 3 but never reconciles it: not a move yet.
		taken("c", 3, 50, ""),
	}
	got := movesTo(events, 9, "c")
	require.Len(t, got, 2)
	assert.Equal(t, move{bucket: 1, from: "a", to: "c", releasing: 10, released: 13, acquired: 12, serving: 20}, got[0])
	assert.Equal(t, move{bucket: 2, from: "b", to: "c", acquired: 45, serving: 47}, got[1], "no release seen since 9: the Lease's holder")
	assert.Equal(t, got[1:], movesFrom(events, 30, "b"))
	assert.Equal(t, []move{{bucket: 2, from: "a", to: "b", releasing: 5, released: 6, acquired: 7, serving: 8}}, movesTo(events, 0, "b"))
	assert.Equal(t, int64(38), int64(lastServed(got, 9)))
}

func TestLineWriter(t *testing.T) {
	var buf bytes.Buffer
	w := &lineWriter{w: &buf, replica: "a"}
	w.write(replicaLine{Event: evServing, Bucket: 3, At: 1})
	w.write(replicaLine{Event: evStable, State: &replicaState{Buckets: []int{3}, Sent: map[string]int{"leases UPDATE": 2}}})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	var got replicaLine
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &got))
	assert.Equal(t, "a", got.Replica)
	assert.Equal(t, []int{3}, got.State.Buckets)
	assert.Equal(t, 2, got.State.Sent["leases UPDATE"])
}

func TestShardTable(t *testing.T) {
	r := &recorder{samples: make(map[sampleKey][]float64)}
	record := func(config, metric string, vs ...float64) {
		for _, v := range vs {
			r.record(shardObjects, config, metric, v)
		}
	}
	record("on/1", mHeapInuse, 19, 20, 21) // median 20
	record("on/2", mHeapInuse, 11)         // 0.55×: within 0.575×
	record("on/4", mHeapInuse, 6)          // 0.30×: above 0.2875×
	record("off/2", mHeapInuse, 17)
	record("on/1", "steady leases UPDATE", 8.5)
	record("on/1", "steady leases GET", 0)
	record("on/2", "join-gap-ms", 300, 500, 400)
	record("on/4", "crash-gap-ms", 16000)
	var out bytes.Buffer
	printShards(&out, r)
	s := out.String()
	assert.Contains(t, s, "median of 3 run(s)")
	assert.Contains(t, s, "20.0 [19.0–21.0]")
	assert.Contains(t, s, "0.550×")
	assert.Contains(t, s, "0.300×")
	assert.Contains(t, s, "yes (2), **NO** (4)")
	assert.Contains(t, s, "the fresh replica: leases UPDATE")
	assert.NotContains(t, s, "leases GET", "a rate that is 0 everywhere is left out")
	assert.Contains(t, s, "1 → 2 replicas")
	assert.Regexp(t, `new holder's first reconcile\s*\|\s*3 \|\s*400\.0 \| 300\.0\s*\| 500\.0`, s)
	assert.Contains(t, s, "a replica is killed with SIGKILL (crash): 3 → 2 replicas")

	var empty bytes.Buffer
	printShards(&empty, &recorder{samples: make(map[sampleKey][]float64)})
	assert.Empty(t, empty.String(), "nothing without BenchmarkShards")
}
