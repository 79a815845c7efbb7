package decode

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fxkube/fxkube/internal/share"
	"github.com/fxkube/fxkube/internal/workload"
)

// store is what an informer holds, with the table and decoder of a
// store that strips managedFields.
type store struct {
	cache.Store
	table   *share.Table
	decoder *Decoder
}

func newStore(t testing.TB, example any, opts ...Option) *store {
	s := &store{Store: cache.NewStore(cache.MetaNamespaceKeyFunc)}
	s.table = share.New(s.Store)
	s.decoder = New(example, s.table, opts...)
	require.NotNil(t, s.decoder)
	return s
}

// hold decodes raw as the store's informer would, and holds the object.
func (s *store) hold(t testing.TB, raw []byte) any {
	obj, err := s.decoder.Decode(raw)
	require.NoError(t, err)
	require.NoError(t, s.Update(obj))
	s.table.Held(obj)
	return obj
}

// withManagedFields returns pod with the managedFields the API server
// would add.
func withManagedFields(pod *corev1.Pod) *corev1.Pod {
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &metav1.Time{Time: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}, FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`),
	}}
	return pod
}

func generated(t testing.TB, raw []byte, strip bool) *corev1.Pod {
	var pod corev1.Pod
	require.NoError(t, pod.Unmarshal(raw))
	if strip {
		pod.ManagedFields = nil
	}
	return &pod
}

func marshal(t testing.TB, obj marshaler) []byte {
	raw, err := obj.Marshal()
	require.NoError(t, err)
	return raw
}

// Pods decode as the generated code decodes them, managedFields
// dropped, and the replicas of a Deployment share what they repeat.
func TestDecodeAsGenerated(t *testing.T) {
	s := newStore(t, &corev1.Pod{}, WithoutManagedFields())
	var held []*corev1.Pod
	for d := range 3 {
		deployment := workload.Deployment("shop", d, 5)
		for r := range 5 {
			raw := marshal(t, withManagedFields(workload.Pod(deployment, r)))
			got := s.hold(t, raw).(*corev1.Pod)
			require.True(t, equality.Semantic.DeepEqual(generated(t, raw, true), got), "pod %d of %d", r, d)
			held = append(held, got)
		}
	}
	a, b := held[3], held[4]
	assert.Same(t, unsafe.SliceData(a.Spec.Containers[0].Env), unsafe.SliceData(b.Spec.Containers[0].Env), "env")
	assert.Same(t, a.Spec.Containers[0].LivenessProbe, b.Spec.Containers[0].LivenessProbe, "probes")
	assert.Same(t, a.Spec.Volumes[0].ConfigMap, b.Spec.Volumes[0].ConfigMap, "volumes")
	assert.NotSame(t, unsafe.SliceData(a.Spec.Containers), unsafe.SliceData(b.Spec.Containers), "containers differ")
	assert.Positive(t, s.decoder.Bytes())
}

// An update decodes as the generated code decodes it, and takes what it
// repeats from the object it replaces.
func TestDecodeUpdates(t *testing.T) {
	s := newStore(t, &corev1.Pod{}, WithoutManagedFields())
	deployment := workload.Deployment("shop", 1, 3)
	pod := withManagedFields(workload.Pod(deployment, 2))
	before := s.hold(t, marshal(t, pod)).(*corev1.Pod)
	tests := []struct {
		name   string
		change func(p *corev1.Pod)
	}{
		{"annotation", func(p *corev1.Pod) { p.Annotations["bench.fxkube.io/version"] = "2" }},
		{"status", func(p *corev1.Pod) { p.Status.ContainerStatuses[1].RestartCount++ }},
		{"spec", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = new(int64(9)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := pod.DeepCopy()
			next.ResourceVersion += "1"
			tt.change(next)
			raw := marshal(t, next)
			got := s.hold(t, raw).(*corev1.Pod)
			require.True(t, equality.Semantic.DeepEqual(generated(t, raw, true), got))
			// What the update repeats of the object it replaces, at any
			// depth, is the replaced object's.
			assert.Same(t, unsafe.SliceData(before.Spec.Containers), unsafe.SliceData(got.Spec.Containers), "containers")
			assert.Same(t, unsafe.SliceData(before.Status.Conditions), unsafe.SliceData(got.Status.Conditions), "conditions")
			assert.Same(t, before.Spec.SecurityContext, got.Spec.SecurityContext, "security context")
			before = got
			pod = next
		})
	}
}

// An update decoded while the store still holds an older object takes
// its fields from the newer object the decoder saw last, which readers
// may already hold: taking the update writes nothing of it. The race
// detector (make test) is what fails here.
func TestDecodeAheadOfTheStoreWritesNothingShared(t *testing.T) {
	s := newStore(t, &corev1.Pod{}, WithoutManagedFields())
	deployment := workload.Deployment("shop", 1, 3)
	pod := withManagedFields(workload.Pod(deployment, 2))
	s.hold(t, marshal(t, pod))

	// The next version, decoded as a watch event the informer has not
	// applied yet: the store still holds the first.
	next := pod.DeepCopy()
	next.ResourceVersion += "1"
	next.Spec.Containers[0].Image += "-next"
	next.Spec.NodeSelector = map[string]string{"zone": "b"}
	ahead, err := s.decoder.Decode(marshal(t, next))
	require.NoError(t, err)
	aheadPod := ahead.(*corev1.Pod)

	// A reader of the newer object, as a handler of its event would be.
	done, read := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		for {
			for _, c := range aheadPod.Spec.Containers {
				n += len(c.Image) + len(c.SecurityContext.Capabilities.Drop)
			}
			n += len(aheadPod.Spec.NodeSelector["zone"])
			select {
			case <-done:
				read <- n
				return
			default:
			}
		}
	}()

	// Its status changes again: its spec's bytes are the newer object's.
	last := next.DeepCopy()
	last.ResourceVersion += "2"
	last.Status.ContainerStatuses[0].RestartCount++
	raw := marshal(t, last)
	got, err := s.decoder.Decode(raw)
	close(done)
	assert.Positive(t, <-read)
	require.NoError(t, err)
	require.True(t, equality.Semantic.DeepEqual(generated(t, raw, true), got))
	assert.Same(t, unsafe.SliceData(aheadPod.Spec.Containers), unsafe.SliceData(got.(*corev1.Pod).Spec.Containers), "containers")
}

// A list decodes as the generated code decodes it, its items taken by
// the table and sharing what they repeat; a list that does not parse
// fails with the generated code's error.
func TestDecodeListAsGenerated(t *testing.T) {
	s := newStore(t, &corev1.Pod{}, WithoutManagedFields())
	deployment := workload.Deployment("shop", 1, 4)
	list := &corev1.PodList{}
	list.ResourceVersion, list.Continue = "42", "next"
	for r := range 4 {
		list.Items = append(list.Items, *withManagedFields(workload.Pod(deployment, r)))
	}
	raw, err := list.Marshal()
	require.NoError(t, err)

	want := &corev1.PodList{}
	require.NoError(t, want.Unmarshal(raw))
	for i := range want.Items {
		want.Items[i].ManagedFields = nil
	}
	got := &corev1.PodList{}
	require.NoError(t, s.decoder.DecodeList(raw, got))
	requireSame(t, want, got)
	assert.Same(t, unsafe.SliceData(got.Items[1].Spec.Containers[0].Env), unsafe.SliceData(got.Items[2].Spec.Containers[0].Env), "items share")

	truncated := raw[:len(raw)-7]
	wantErr := (&corev1.PodList{}).Unmarshal(truncated)
	require.Error(t, wantErr)
	err = s.decoder.DecodeList(truncated, &corev1.PodList{})
	require.Error(t, err)
	assert.Equal(t, wantErr.Error(), err.Error())
	require.ErrorContains(t, s.decoder.DecodeList(raw, &corev1.ConfigMapList{}), "is not a list of")
}

// A store whose objects are all deleted leaves its decoder holding
// nothing, though its table's pool serves another store that still holds
// the same Pods, as members of a fleet share one.
func TestEmptiedStoreOfAPoolLeavesItsDecoderEmpty(t *testing.T) {
	pool := share.NewPool()
	stores := [2]*store{}
	for i := range stores {
		s := &store{Store: cache.NewStore(cache.MetaNamespaceKeyFunc)}
		s.table = pool.Table(s.Store)
		s.decoder = New(&corev1.Pod{}, s.table, WithoutManagedFields())
		stores[i] = s
	}
	deployment := workload.Deployment("shop", 1, 4)
	for r := range 4 {
		raw := marshal(t, withManagedFields(workload.Pod(deployment, r)))
		for _, s := range stores {
			s.hold(t, raw)
		}
	}
	emptied := stores[0]
	require.Positive(t, emptied.decoder.Bytes())
	for _, obj := range emptied.List() {
		require.NoError(t, emptied.Delete(obj))
		emptied.table.Dropped(obj)
		emptied.decoder.Dropped(obj)
	}
	assert.Zero(t, emptied.decoder.Bytes(), "the emptied store's decoder")
	assert.Positive(t, stores[1].decoder.Bytes(), "the other store's")
	assert.Len(t, stores[1].List(), 4)
}
