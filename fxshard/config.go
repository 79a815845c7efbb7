package fxshard

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
)

// LeaseLabel is the label the coordinator puts on its Leases, with
// Config.Name as its value, and watches them by:
// `kubectl get leases -l fxkube.io/shard=NAME` lists a group's members and
// buckets.
const LeaseLabel = "fxkube.io/shard"

// Config configures a Coordinator. The timings are those of
// controller-runtime's leader election by default, and mean the same; see
// the package documentation for what each one bounds.
type Config struct {
	// Buckets is how many buckets the hash space is cut into. Every replica
	// of one Name must use the same count: to change it, change Name too.
	// Defaults to DefaultBuckets (16).
	Buckets int

	// Namespace holds the Leases. Required; usually the pod's own.
	Namespace string

	// Name names the group of replicas that share the buckets: their
	// Leases are <Name>-bucket-<i> and <Name>-member-<identity>, labelled
	// LeaseLabel=<Name>. Required; a DNS-1123 label (at most 63 lowercase
	// letters, digits and '-').
	Name string

	// Identity tells this replica from the others in the Leases. It must be
	// unique among the running replicas of the group. Any string: its
	// member Lease is named after it when it makes a valid name, and
	// otherwise after its letters and digits, lowercased, and a hash of it.
	// Defaults to the hostname, "_" and a random UUID, as
	// controller-runtime's leader election does.
	Identity string

	// LeaseDuration is how long the others wait, from the moment they saw a
	// Lease last change, before they take it over from a holder that
	// stopped renewing. Defaults to 15s.
	LeaseDuration time.Duration

	// RenewDeadline is how long a holder keeps a bucket after the start of
	// its last successful renewal; past it, the holder stops the bucket's
	// work. Shorter than LeaseDuration. Defaults to 10s.
	RenewDeadline time.Duration

	// RetryPeriod is how often a replica renews its Leases and looks for
	// buckets to take or give back. Shorter than RenewDeadline. Defaults to
	// 2s.
	RetryPeriod time.Duration

	// Logger logs acquisitions, releases and losses of buckets. Defaults to
	// zap.NewNop().
	Logger *zap.Logger
}

// Defaults of Config's timings, controller-runtime's leader election's.
const (
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetryPeriod   = 2 * time.Second
)

// withDefaults returns c with its defaults filled in, or every problem with
// it, each naming the field and how to fix it.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.Buckets < 0 {
		errs = append(errs, fmt.Errorf("Config.Buckets is %d; set it to 1 or more, or to 0 for the default %d", c.Buckets, DefaultBuckets))
	}
	if c.Buckets == 0 {
		c.Buckets = DefaultBuckets
	}
	if c.Namespace == "" {
		errs = append(errs, errors.New("Config.Namespace is empty; set it to the namespace of the Leases, usually the pod's own"))
	} else if msgs := validation.IsDNS1123Label(c.Namespace); msgs != nil {
		errs = append(errs, fmt.Errorf("Config.Namespace %q is not a namespace name (%s); use the name of an existing namespace", c.Namespace, strings.Join(msgs, "; ")))
	}
	if c.Name == "" {
		errs = append(errs, errors.New("Config.Name is empty; set it to a name for the group of replicas, such as the controller's"))
	} else if msgs := validation.IsDNS1123Label(c.Name); msgs != nil {
		errs = append(errs, fmt.Errorf("Config.Name %q is not a DNS-1123 label (%s); use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit", c.Name, strings.Join(msgs, "; ")))
	}
	if c.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			errs = append(errs, fmt.Errorf("Config.Identity is empty and the hostname is unknown (%w); set Config.Identity to a name unique among the replicas", err))
		}
		c.Identity = host + "_" + string(uuid.NewUUID())
	}
	for _, d := range []struct {
		name  string
		value *time.Duration
		def   time.Duration
	}{
		{"Config.LeaseDuration", &c.LeaseDuration, defaultLeaseDuration},
		{"Config.RenewDeadline", &c.RenewDeadline, defaultRenewDeadline},
		{"Config.RetryPeriod", &c.RetryPeriod, defaultRetryPeriod},
	} {
		if *d.value < 0 {
			errs = append(errs, fmt.Errorf("%s is %v; set it above 0, or to 0 for the default %v", d.name, *d.value, d.def))
		}
		if *d.value <= 0 {
			*d.value = d.def
		}
	}
	if c.LeaseDuration <= c.RenewDeadline {
		errs = append(errs, fmt.Errorf("Config.LeaseDuration (%v) must be longer than Config.RenewDeadline (%v): a holder stops a bucket RenewDeadline after its last renewal, and the others must not take it before; raise LeaseDuration or lower RenewDeadline", c.LeaseDuration, c.RenewDeadline))
	}
	if c.RenewDeadline <= c.RetryPeriod {
		errs = append(errs, fmt.Errorf("Config.RenewDeadline (%v) must be longer than Config.RetryPeriod (%v): a holder renews every RetryPeriod and needs more than one try before its deadline; raise RenewDeadline or lower RetryPeriod", c.RenewDeadline, c.RetryPeriod))
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("fxshard: invalid config: %w", err)
	}
	return c, nil
}

// bucketLeasePrefix and memberLeasePrefix begin the names of the group's
// Leases: <Name>-bucket-<i> and <Name>-member-<identity>.
func (c Config) bucketLeasePrefix() string { return c.Name + "-bucket-" }
func (c Config) memberLeasePrefix() string { return c.Name + "-member-" }

func (c Config) bucketLeaseName(bucket int) string {
	return c.bucketLeasePrefix() + strconv.Itoa(bucket)
}

// memberLeaseName returns the name of the member Lease of c.Identity, a
// DNS-1123 subdomain. An identity that would not make one (controller-
// runtime's default has a "_") keeps its letters, lowercased, and digits,
// with '-' for the rest, and gets a hash of itself, so that identities that
// differ only in case or punctuation get different Leases.
func (c Config) memberLeaseName() string {
	prefix := c.memberLeasePrefix()
	if validation.IsDNS1123Subdomain(prefix+c.Identity) == nil {
		return prefix + c.Identity
	}
	kept := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		default:
			return '-'
		}
	}, c.Identity)
	h := fnv.New32a()
	h.Write([]byte(c.Identity))
	suffix := fmt.Sprintf("%08x", h.Sum32())
	if room := validation.DNS1123SubdomainMaxLength - len(prefix) - len(suffix) - 1; len(kept) > room {
		kept = kept[:room]
	}
	if kept = strings.Trim(kept, "-"); kept == "" {
		return prefix + suffix
	}
	return prefix + kept + "-" + suffix
}
