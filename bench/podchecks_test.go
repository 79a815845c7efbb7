package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// These checks need no API server: they keep BenchmarkPods' workloads
// honest and its table right.

// A Pod survives protobuf, as informers decode it; its name gives its
// index back, and the first 1,000 Pods are 10 replicas of each
// Deployment.
func TestPodWorkload(t *testing.T) {
	seen := make(map[string]bool)
	for _, i := range []int{0, 1, 99, 100, 999, 1000, 4321, 9999} {
		pod := newPod(i)
		raw, err := pod.Marshal()
		require.NoError(t, err)
		var got corev1.Pod
		require.NoError(t, got.Unmarshal(raw))
		got.TypeMeta = pod.TypeMeta // not in the protobuf message
		assert.True(t, equality.Semantic.DeepEqual(pod, &got), "Pod %d round-trips", i)

		assert.Equal(t, podKey(i), client.ObjectKeyFromObject(pod), i)
		assert.Equal(t, i, podIndex(podKey(i)), pod.Name)
		assert.Equal(t, int32(1), versionOf(pod), i)
		assert.Empty(t, pod.UID, "the API server sets it")
		assert.True(t, mustSelector(podsKind.selector).Matches(labels.Set(pod.Labels)), i)
		assert.NotEmpty(t, pod.Status.ContainerStatuses, "a kubelet's status")
		assert.False(t, seen[pod.Namespace+"/"+pod.Name], "Pod %d has a name of its own", i)
		seen[pod.Namespace+"/"+pod.Name] = true
	}
	assert.Equal(t, -1, podIndex(client.ObjectKey{Name: "obj-00001"}))
	assert.Equal(t, 10, podsKind.listed(1_000), "one Deployment's 10 replicas")
	assert.Equal(t, 100, podsKind.listed(10_000), "one Deployment's 100 replicas")
}

// A burst's patch restarts a Pod's first container: the Pod then carries
// the version, and the patch changes its status only, as a kubelet's.
func TestPodRestartedPatch(t *testing.T) {
	pod := newPod(4321)
	patch, err := restarted(4321, 7)
	require.NoError(t, err)
	var fields map[string]map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(patch, &fields))
	assert.Len(t, fields, 1, "the status only")
	var got corev1.Pod
	require.NoError(t, json.Unmarshal(patch, &got))
	assert.Equal(t, int32(7), podVersion(&got))
	before, after := pod.Status.ContainerStatuses, got.Status.ContainerStatuses
	require.Len(t, after, len(before))
	assert.True(t, equality.Semantic.DeepEqual(before[1:], after[1:]), "the other containers repeat")
	assert.NotEqual(t, before[0].ContainerID, after[0].ContainerID)
	assert.True(t, after[0].State.Running.StartedAt.After(before[0].State.Running.StartedAt.Time))
	require.NotNil(t, after[0].LastTerminationState.Terminated)
	changed := 0
	for j, c := range got.Status.Conditions {
		if !c.LastTransitionTime.Equal(&pod.Status.Conditions[j].LastTransitionTime) {
			changed++
		}
	}
	assert.Equal(t, 2, changed, "Ready and ContainersReady")
}

// A Certificate survives JSON and its deep copy shares nothing.
func TestCertificateWorkload(t *testing.T) {
	c := newCertificate(7)
	raw, err := json.Marshal(c)
	require.NoError(t, err)
	var got Certificate
	require.NoError(t, json.Unmarshal(raw, &got))
	assert.Equal(t, c.Spec, got.Spec)
	assert.True(t, c.Status.NotAfter.Equal(got.Status.NotAfter))
	assert.Equal(t, int32(1), versionOf(c))
	assert.Equal(t, 7, objectIndex(certificatesKind.key(7)))

	cp := c.DeepCopy()
	require.Equal(t, c, cp)
	cp.Spec.DNSNames[0] = "changed"
	cp.Spec.SecretTemplate.Labels["team"] = "changed"
	cp.Spec.PrivateKey.Size = 1
	cp.Status.Conditions[0].Message = "changed"
	assert.Equal(t, newCertificate(7), c, "the copy shares nothing with the original")

	scheme, err := benchScheme()
	require.NoError(t, err)
	gvks, _, err := scheme.ObjectKinds(&Certificate{})
	require.NoError(t, err)
	assert.Equal(t, certificateGroupVersion.WithKind("Certificate"), gvks[0])
	assert.Equal(t, "certificates."+certificateGroupVersion.Group, certificateCRD.Name)
}

// Every kinds workload builds on fxkube, with and without sharing and as
// bytes, and on plain informers, one store per kind.
func TestKindsWorkloadsBuild(t *testing.T) {
	for _, w := range kindsWorkloads {
		t.Run(w.name, func(t *testing.T) {
			wl := w.workload()
			require.Len(t, wl.stores(10), len(w.kinds))
			for _, sys := range []string{fxkube, fxkubeUnshared, fxkubeBytes} {
				s, err := wl.systems[sys](offline, newHarness(wl.controllers, 10))
				require.NoError(t, err, sys)
				fx := s.(*fxkubeSystem)
				assert.Len(t, fx.registry.Stores(), len(w.kinds), sys)
				assert.Equal(t, len(w.kinds), fx.informers(), sys)
			}
			s, err := wl.systems[plainInformers](offline, newHarness(wl.controllers, 10))
			require.NoError(t, err)
			assert.Equal(t, len(w.kinds), s.informers())
			require.NoError(t, s.stop(context.Background()))
			assert.Positive(t, w.kinds[0].listed(w.objects))
		})
	}
}

func TestKindsTable(t *testing.T) {
	r := &recorder{samples: make(map[sampleKey][]float64)}
	w := kindsWorkloads[0]
	record := func(sys, metric string, v float64) { r.record(w.objects, kindsName(w, sys), metric, v) }
	for sys, heap := range map[string]float64{fxkube: 6, fxkubeUnshared: 18, fxkubeBytes: 4, controllerRuntime: 20, plainInformers: 18} {
		record(sys, mSynced, 100)
		record(sys, mHeapPerObject, heap)
	}
	record(fxkube, mEventCPUSpread, 130)
	record(controllerRuntime, mEventCPUSpread, 100) // 1.3×: missed
	record(fxkube, "Get ns/op", 50)
	record(fxkube, "Get allocs/op", 0)
	var out bytes.Buffer
	printKinds(&out, r)
	rows := tableRows(out.String())["Pods of 100 Deployments × 10 replicas: 1000 objects"]
	require.NotNil(t, rows, out.String())
	assert.Equal(t, []string{"6.00", "18.00", "4.00", "20.00", "18.00", "0.300×", "0.900×", "0.200×", "0.333×", "≤ 0.50× cr", "yes"}, rows["heap per object, above that (KiB)"])
	assert.Equal(t, "**NO**", rows["CPU per watch event, collections spread (µs)"][10])
	assert.Equal(t, "yes", rows["Get one of pods (allocs/op)"][10])
}

// A burst with the collector off is charged the collector's cost per
// byte allocated: 0.8 s of burst, and 100 MB allocated at 0.1 s per 50 MB
// of runway, over 1,000 events.
func TestEventCPUSpreadsCollections(t *testing.T) {
	r := childResult{
		Updates: 1000, BurstCPU: 800 * time.Millisecond,
		BurstAllocated: 100 << 20, CollectionCPU: 100 * time.Millisecond, CollectionRunway: 50 << 20,
	}
	assert.Equal(t, time.Millisecond, r.eventCPU())
}

// BenchmarkPods alternates the systems -bench selects, so it must select
// them as the testing package does.
func TestSelectedSystems(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		want    []string
	}{
		{".", kindsSystems},
		{"BenchmarkPods", kindsSystems},
		{"BenchmarkPods/objects", kindsSystems},
		{"BenchmarkPods/pods-10", nil},
		{"BenchmarkPods/.*/system=(fxkube|controller-runtime)$", []string{fxkube, controllerRuntime}},
		{"BenchmarkPods/[a-z-]+/system=fxkube-bytes", []string{fxkubeBytes}},
		{"BenchmarkSystems|BenchmarkPods/objects/system=informers", []string{plainInformers}},
		{"BenchmarkPods/[a-z0-9-]+/op=", nil},
	} {
		assert.Equal(t, tt.want, selectedSystems(tt.pattern, "objects"), tt.pattern)
	}
}
