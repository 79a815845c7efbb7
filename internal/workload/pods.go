// Package workload builds realistic objects for tests and benchmarks.
package workload

import (
	"fmt"
	"hash/fnv"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Started is when the workload's Pods started.
var Started = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Deployment returns the d-th Deployment of namespace, with replicas
// Pods, as a team would write one: two containers, probes, resources,
// env, a security context, volumes and tolerations.
func Deployment(namespace string, d int, replicas int32) *appsv1.Deployment {
	name := fmt.Sprintf("service-%03d", d)
	labels := map[string]string{
		"app.kubernetes.io/name":      name,
		"app.kubernetes.io/part-of":   "shop",
		"app.kubernetes.io/component": "backend",
		"app.kubernetes.io/version":   "1.24.3",
	}
	resources := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
		}
	}
	security := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	probe := func(path string, delay int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
			InitialDelaySeconds: delay, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
		}
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{
					"prometheus.io/scrape": "true", "prometheus.io/port": "9090",
				}},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					Containers: []corev1.Container{{
						Name:            "app",
						Image:           fmt.Sprintf("registry.example.com/shop/%s:1.24.3", name),
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"--config=/etc/app/config.yaml", "--log-format=json"},
						Ports: []corev1.ContainerPort{
							{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
						},
						Env: []corev1.EnvVar{
							{Name: "SERVICE_NAME", Value: name},
							{Name: "LOG_LEVEL", Value: "info"},
							{Name: "DATABASE_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
								LocalObjectReference: corev1.LocalObjectReference{Name: name + "-db"}, Key: "url"}}},
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
							{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
						},
						Resources:                resources("250m", "512Mi"),
						VolumeMounts:             []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app", ReadOnly: true}, {Name: "tmp", MountPath: "/tmp"}},
						LivenessProbe:            probe("/healthz", 10),
						ReadinessProbe:           probe("/readyz", 5),
						SecurityContext:          security,
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}, {
						Name:                     "proxy",
						Image:                    "registry.example.com/infra/envoy:1.31.2",
						ImagePullPolicy:          corev1.PullIfNotPresent,
						Args:                     []string{"--config-path=/etc/envoy/envoy.yaml"},
						Ports:                    []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001, Protocol: corev1.ProtocolTCP}},
						Resources:                resources("100m", "128Mi"),
						VolumeMounts:             []corev1.VolumeMount{{Name: "envoy", MountPath: "/etc/envoy", ReadOnly: true}},
						SecurityContext:          security,
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"}, DefaultMode: ptr.To[int32](0o644)}}},
						{Name: "envoy", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "envoy"}, DefaultMode: ptr.To[int32](0o644)}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
					RestartPolicy:                 corev1.RestartPolicyAlways,
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					DNSPolicy:                     corev1.DNSClusterFirst,
					SecurityContext:               &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000), RunAsUser: ptr.To[int64](1000)},
					SchedulerName:                 corev1.DefaultSchedulerName,
					Tolerations: []corev1.Toleration{
						{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
						{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
					},
					EnableServiceLinks: ptr.To(true),
					PreemptionPolicy:   ptr.To(corev1.PreemptLowerPriority),
					Priority:           ptr.To[int32](0),
				},
			},
		},
	}
}

// Pod returns the r-th running Pod of d, as its ReplicaSet's controller,
// the API server, the scheduler and a kubelet leave it: defaults filled
// in, an owner, a node, IPs, start times, five conditions and container
// statuses. The API server adds a service account token volume of a name
// of the Pod's own, mounted in each container: no two Pods' containers
// are equal, as on a cluster.
func Pod(d *appsv1.Deployment, r int) *corev1.Pod {
	h := fnv.New32a()
	_, _ = h.Write([]byte(d.Name))
	hash := fmt.Sprintf("%010x", h.Sum32())
	rs := d.Name + "-" + hash
	name := fmt.Sprintf("%s-%05x", rs, r)
	labels := maps.Clone(d.Spec.Template.Labels)
	labels[appsv1.DefaultDeploymentUniqueLabelKey] = hash
	spec := *d.Spec.Template.Spec.DeepCopy()
	spec.NodeName = fmt.Sprintf("node-%03d", r%50)
	token := fmt.Sprintf("kube-api-access-%05x", r)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: token, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}}})
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: token, ReadOnly: true,
			MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"})
	}
	// Each Pod was created at a second of its own (API times keep
	// seconds); the kubelet's steps follow each other by seconds.
	created := Started.Add(time.Duration(r*17+len(d.Name)) * time.Second)
	at := func(s int) metav1.Time { return metav1.NewTime(created.Add(time.Duration(s) * time.Second)) }
	ip := fmt.Sprintf("10.%d.%d.%d", 1+r/65536, r/256%256, r%256)
	hostIP := fmt.Sprintf("192.168.0.%d", r%50)
	status := corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at(3)},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at(1)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(11)},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at(11)},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(0)},
		},
		HostIP:    hostIP,
		HostIPs:   []corev1.HostIP{{IP: hostIP}},
		PodIP:     ip,
		PodIPs:    []corev1.PodIP{{IP: ip}},
		StartTime: new(at(1)),
		QOSClass:  corev1.PodQOSBurstable,
	}
	for i, c := range spec.Containers {
		mounts := make([]corev1.VolumeMountStatus, len(c.VolumeMounts))
		for j, m := range c.VolumeMounts {
			mounts[j] = corev1.VolumeMountStatus{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly}
			if m.ReadOnly {
				mounts[j].RecursiveReadOnly = ptr.To(corev1.RecursiveReadOnlyDisabled)
			}
		}
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name:         c.Name,
			State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(4 + i)}},
			Ready:        true,
			Image:        c.Image,
			ImageID:      c.Image + "@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			ContainerID:  fmt.Sprintf("containerd://%064x", r*2+i),
			Started:      ptr.To(true),
			Resources:    c.Resources.DeepCopy(),
			VolumeMounts: mounts,
		})
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			GenerateName:      rs + "-",
			Namespace:         d.Namespace,
			UID:               types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", h.Sum32(), r)),
			ResourceVersion:   fmt.Sprint(100000 + r),
			CreationTimestamp: at(0),
			Labels:            labels,
			Annotations:       maps.Clone(d.Spec.Template.Annotations),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs,
				UID: types.UID("rs-" + rs), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		Spec:   spec,
		Status: status,
	}
}

// Restart changes status as a kubelet does when the Pod's first
// container restarts for the n-th time: the container's state, last
// state, ID and restart count, and the times of the Ready and
// ContainersReady conditions. The rest of status repeats.
func Restart(status *corev1.PodStatus, n int32) {
	if len(status.ContainerStatuses) == 0 {
		return
	}
	at := metav1.NewTime(Started.Add(time.Duration(n) * time.Hour))
	c := &status.ContainerStatuses[0]
	c.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 137, Reason: "OOMKilled", FinishedAt: at, ContainerID: c.ContainerID}}
	if c.State.Running != nil {
		c.LastTerminationState.Terminated.StartedAt = c.State.Running.StartedAt
	}
	c.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}
	c.RestartCount = n
	h := fnv.New64a()
	_, _ = h.Write([]byte(c.ContainerID))
	c.ContainerID = fmt.Sprintf("containerd://%048x%016x", h.Sum64(), n)
	for i := range status.Conditions {
		if t := status.Conditions[i].Type; t == corev1.PodReady || t == corev1.ContainersReady {
			status.Conditions[i].LastTransitionTime = at
		}
	}
}
