package fxshard

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestConfigErrors(t *testing.T) {
	valid := Config{Namespace: "default", Name: "shard"}
	tests := []struct {
		name string
		give func(*Config)
		want []string // each in the error: the field and the fix
	}{
		{
			name: "buckets",
			give: func(c *Config) { c.Buckets = -2 },
			want: []string{"Config.Buckets is -2; set it to 1 or more, or to 0 for the default 16"},
		},
		{
			name: "no namespace",
			give: func(c *Config) { c.Namespace = "" },
			want: []string{"Config.Namespace is empty; set it to the namespace of the Leases"},
		},
		{
			name: "bad namespace",
			give: func(c *Config) { c.Namespace = "Kube_System" },
			want: []string{`Config.Namespace "Kube_System" is not a namespace name`, "use the name of an existing namespace"},
		},
		{
			name: "no name",
			give: func(c *Config) { c.Name = "" },
			want: []string{"Config.Name is empty; set it to a name for the group of replicas"},
		},
		{
			name: "bad name",
			give: func(c *Config) { c.Name = "my.shard" },
			want: []string{`Config.Name "my.shard" is not a DNS-1123 label`, "use at most 63 lowercase letters, digits and '-'"},
		},
		{
			name: "long name",
			give: func(c *Config) { c.Name = strings.Repeat("a", 64) },
			want: []string{"is not a DNS-1123 label (must be no more than 63 characters)"},
		},
		{
			name: "negative timing",
			give: func(c *Config) { c.RetryPeriod = -time.Second },
			want: []string{"Config.RetryPeriod is -1s; set it above 0, or to 0 for the default 2s"},
		},
		{
			name: "renew deadline beyond lease duration",
			give: func(c *Config) { c.RenewDeadline = 20 * time.Second },
			want: []string{"Config.LeaseDuration (15s) must be longer than Config.RenewDeadline (20s)", "raise LeaseDuration or lower RenewDeadline"},
		},
		{
			name: "equal lease duration and renew deadline",
			give: func(c *Config) { c.LeaseDuration, c.RenewDeadline = 3*time.Second, 3*time.Second },
			want: []string{"Config.LeaseDuration (3s) must be longer than Config.RenewDeadline (3s)"},
		},
		{
			name: "retry period beyond renew deadline",
			give: func(c *Config) { c.RetryPeriod = 10 * time.Second },
			want: []string{"Config.RenewDeadline (10s) must be longer than Config.RetryPeriod (10s)", "raise RenewDeadline or lower RetryPeriod"},
		},
		{
			name: "every problem at once",
			give: func(c *Config) { *c = Config{Buckets: -1, RetryPeriod: time.Minute} },
			want: []string{"Config.Buckets", "Config.Namespace", "Config.Name", "Config.RenewDeadline (10s) must be longer than Config.RetryPeriod (1m0s)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.give(&cfg)
			_, err := New(nil, nil, cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "fxshard: invalid config: ")
			for _, want := range tt.want {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestNewNeedsClientAndHandler(t *testing.T) {
	cfg := Config{Namespace: "default", Name: "shard"}
	_, err := New(nil, HandlerFuncs{}, cfg)
	require.EqualError(t, err, "fxshard: New needs a client for the Leases; pass the app's kubernetes.Interface")

	client, err := kubernetes.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	require.NoError(t, err)
	_, err = New(client, nil, cfg)
	require.EqualError(t, err, "fxshard: New needs a Handler; pass the one that starts and drains each bucket's work")
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := Config{Namespace: "default", Name: "shard"}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, 16, cfg.Buckets)
	assert.Equal(t, 15*time.Second, cfg.LeaseDuration)
	assert.Equal(t, 10*time.Second, cfg.RenewDeadline)
	assert.Equal(t, 2*time.Second, cfg.RetryPeriod)
	assert.NotNil(t, cfg.Logger)

	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Regexp(t, "^"+host+"_[0-9a-f-]{36}$", cfg.Identity, "hostname, _ and a UUID, as controller-runtime's leader election")
	again, err := Config{Namespace: "default", Name: "shard"}.withDefaults()
	require.NoError(t, err)
	assert.NotEqual(t, cfg.Identity, again.Identity, "each replica gets an identity of its own")
}

func TestMemberLeaseName(t *testing.T) {
	tests := []struct {
		give string
		want string // "" to check only that it is valid and keeps the identity's letters
	}{
		{give: "replica-a", want: "shard-member-replica-a"},
		{give: "pod-7.node-2", want: "shard-member-pod-7.node-2"},
		{give: "Host_0b1c-uuid", want: ""},
		{give: "___", want: ""},
		{give: strings.Repeat("x", 300), want: ""},
	}
	names := map[string]string{}
	for _, tt := range tests {
		name := Config{Name: "shard", Identity: tt.give}.memberLeaseName()
		assert.Empty(t, validation.IsDNS1123Subdomain(name), "%q for identity %q", name, tt.give)
		if tt.want != "" {
			assert.Equal(t, tt.want, name)
		}
		names[name] = tt.give
	}
	assert.Equal(t, "shard-member-host-0b1c-uuid-", Config{Name: "shard", Identity: "Host_0b1c-uuid"}.memberLeaseName()[:28])

	// Identities that differ only in what a name cannot hold get Leases of
	// their own.
	for _, id := range []string{"host_1", "host-1", "Host_1", "HOST_1"} {
		name := Config{Name: "shard", Identity: id}.memberLeaseName()
		_, dup := names[name]
		assert.False(t, dup, "identity %q shares Lease %q with %q", id, name, names[name])
		names[name] = id
	}
}
