package kubeconfig

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/fx"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/internal/contract"
)

// File is a member cluster of a kubeconfig file: a context of the file,
// under a name of the operator's choice.
type File struct {
	// Name names the cluster, a DNS subdomain.
	Name fxcluster.ClusterName
	// Path is the kubeconfig file's path. Relative paths in the file are
	// relative to its directory, as kubectl reads them.
	Path string
	// Context is the file's context to use. Defaults to its
	// current-context.
	Context string
}

// ParseFile parses a File written NAME=PATH[@CONTEXT], such as
// "eu=/etc/fleet/eu.kubeconfig" or
// "us=/etc/fleet/all.kubeconfig@kubernetes-admin@us". The context is what
// follows the first "@" after the "=", as context names often hold an
// "@" and paths rarely do.
func ParseFile(s string) (File, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok {
		return File{}, fmt.Errorf("cluster kubeconfig %q: want NAME=PATH[@CONTEXT], such as eu=/etc/fleet/eu.kubeconfig", s)
	}
	path, kctx, hasContext := strings.Cut(rest, "@")
	if hasContext && kctx == "" {
		return File{}, fmt.Errorf("cluster kubeconfig %q: the context after \"@\" is empty; drop the \"@\" to use the file's current-context", s)
	}
	f := File{Name: fxcluster.ClusterName(name), Path: path, Context: kctx}
	if err := f.validate(); err != nil {
		return File{}, err
	}
	return f, nil
}

// validate checks f's name and path.
func (f File) validate() error {
	if msgs := validation.IsDNS1123Subdomain(f.Name.String()); len(msgs) > 0 {
		return fmt.Errorf("cluster kubeconfig %q: the name %q is not a cluster name (a DNS subdomain, such as eu-west-1): %s",
			f, f.Name, strings.Join(msgs, "; "))
	}
	if f.Path == "" {
		return fmt.Errorf("cluster kubeconfig %q: the path is empty; write NAME=PATH[@CONTEXT]", f)
	}
	return nil
}

// String returns f as ParseFile reads it.
func (f File) String() string {
	s := f.Name.String() + "=" + f.Path
	if f.Context != "" {
		s += "@" + f.Context
	}
	return s
}

// Files is a list of kubeconfig files, and a repeatable flag of them
// (flag.Value and pflag.Value): each use adds one File, as ParseFile
// reads it.
type Files []File

// Set adds the File s, as ParseFile reads it.
func (fs *Files) Set(s string) error {
	f, err := ParseFile(s)
	if err != nil {
		return err
	}
	*fs = append(*fs, f)
	return nil
}

// String returns the files, separated by commas.
func (fs *Files) String() string {
	if fs == nil {
		return ""
	}
	out := make([]string, len(*fs))
	for i, f := range *fs {
		out[i] = f.String()
	}
	return strings.Join(out, ",")
}

// Type names the flag's value in pflag's help.
func (fs *Files) Type() string { return "NAME=PATH[@CONTEXT]" }

// DefaultPollInterval is how often a FileProvider reads its files for
// changes, unless FileOptions say otherwise.
const DefaultPollInterval = 5 * time.Second

// FileOptions say which kubeconfig files a FileProvider engages.
type FileOptions struct {
	// Files are the clusters; each name once.
	Files []File

	// PollInterval is how often the files are read for changes. Defaults
	// to DefaultPollInterval; negative reads them only at Start.
	PollInterval time.Duration

	// Logger logs clusters reloaded, and files that cannot be. Defaults
	// to no logs; ProvideFiles gives it the app's.
	Logger *zap.Logger
}

// FileProvider engages a member cluster for each kubeconfig file it is
// given, for as long as it runs.
//
// The operator names the files, so they are trusted: their users may run
// exec credential plugins (the operator's own commands) and read local
// files, as kubectl's do.
//
// A file that changes, as its hash says, reconnects its cluster. A file
// that becomes unreadable or invalid keeps the cluster on its last good
// config, with an error logged once: a half-written file does not take a
// cluster away.
type FileProvider struct {
	opts    FileOptions
	log     *zap.Logger
	started atomic.Bool
}

var _ fxcluster.Provider = (*FileProvider)(nil)

// NewFileProvider returns a provider of the files opts name. It reads no
// file: Start does.
func NewFileProvider(opts FileOptions) (*FileProvider, error) {
	seen := make(map[fxcluster.ClusterName]File, len(opts.Files))
	var errs []error
	for _, f := range opts.Files {
		if err := f.validate(); err != nil {
			errs = append(errs, err)
		}
		if prev, ok := seen[f.Name]; ok {
			errs = append(errs, fmt.Errorf("cluster %s is named twice, by %s and %s; give each cluster its own name", f.Name, prev, f))
		}
		seen[f.Name] = f
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	p := &FileProvider{opts: opts, log: opts.Logger}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	return p, nil
}

// fileCluster is the state of one File of a started FileProvider.
type fileCluster struct {
	File
	// hash is of the content last read, good or not.
	hash [sha256.Size]byte
	// cancel ends the engaged cluster's context.
	cancel context.CancelFunc
}

// Start reads every file and engages its cluster, then reads them for
// changes until ctx ends, when it ends every cluster's context and
// returns nil. A file that cannot be loaded at Start, or a cluster that
// Engage refuses, is an error: Start engages none then. It may be
// called once.
func (p *FileProvider) Start(ctx context.Context, clusters fxcluster.Aware) error {
	if !p.started.CompareAndSwap(false, true) {
		return errors.New("kubeconfig file provider: started twice; a provider runs once")
	}
	state := make([]fileCluster, len(p.opts.Files))
	defer func() {
		for _, c := range state {
			if c.cancel != nil {
				c.cancel()
			}
		}
	}()
	configs := make([]*rest.Config, len(state))
	var errs []error
	for i, f := range p.opts.Files {
		state[i].File = f
		var err error
		if configs[i], state[i].hash, err = loadFile(f); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i := range state {
		if err := p.engage(ctx, clusters, &state[i], configs[i]); err != nil {
			return err
		}
		p.log.Info("member cluster engaged", zap.Stringer("cluster", state[i].Name), zap.String("file", state[i].Path),
			zap.String("server", configs[i].Host))
	}
	if p.opts.PollInterval < 0 {
		<-ctx.Done()
		return nil
	}
	ticker := time.NewTicker(p.opts.PollInterval)
	defer ticker.Stop()
	problems := make([]string, len(state))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		for i := range state {
			problems[i] = p.reload(ctx, clusters, &state[i], problems[i])
		}
	}
}

// engage engages c's cluster with cfg, ending its previous context.
func (p *FileProvider) engage(ctx context.Context, clusters fxcluster.Aware, c *fileCluster, cfg *rest.Config) error {
	if c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
	cctx, cancel := context.WithCancel(ctx)
	if err := clusters.Engage(cctx, c.Name, cfg); err != nil {
		cancel()
		return fmt.Errorf("cluster kubeconfig %s: %w", c.File, err)
	}
	c.cancel = cancel
	return nil
}

// reload reconnects c's cluster if its file changed, and returns the
// problem logged of the file, "" if none: a problem is logged once.
func (p *FileProvider) reload(ctx context.Context, clusters fxcluster.Aware, c *fileCluster, logged string) string {
	data, err := readFile(c.File)
	if err == nil && sha256.Sum256(data) == c.hash {
		return ""
	}
	var cfg *rest.Config
	if err == nil {
		cfg, c.hash, err = loadData(c.File, data)
	}
	if err != nil {
		if msg := err.Error(); msg != logged {
			p.log.Error("kubeconfig file not reloaded; its cluster keeps its last config", zap.Stringer("cluster", c.Name),
				zap.String("file", c.Path), zap.Error(err))
			return msg
		}
		return logged
	}
	if err := p.engage(ctx, clusters, c, cfg); err != nil {
		p.log.Error("member cluster left: its new kubeconfig is refused", zap.Stringer("cluster", c.Name),
			zap.String("file", c.Path), zap.Error(err))
		return err.Error()
	}
	p.log.Info("member cluster reconnected: its kubeconfig file changed", zap.Stringer("cluster", c.Name),
		zap.String("file", c.Path), zap.String("server", cfg.Host))
	return ""
}

// loadFile reads and loads f's kubeconfig, trusted, and returns the hash
// of the content read.
func loadFile(f File) (*rest.Config, [sha256.Size]byte, error) {
	data, err := readFile(f)
	if err != nil {
		return nil, [sha256.Size]byte{}, err
	}
	return loadData(f, data)
}

// readFile returns the content of f's file.
func readFile(f File) ([]byte, error) {
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("cluster kubeconfig %s: %w; fix the path", f, err)
	}
	return data, nil
}

// loadData loads f's kubeconfig from the file's content data.
func loadData(f File, data []byte) (*rest.Config, [sha256.Size]byte, error) {
	hash := sha256.Sum256(data)
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, hash, fmt.Errorf("cluster kubeconfig %s: parse: %w", f, err)
	}
	dir, err := filepath.Abs(filepath.Dir(f.Path))
	if err == nil {
		err = clientcmd.ResolveConfigPaths(cfg, dir)
	}
	if err != nil {
		return nil, hash, fmt.Errorf("cluster kubeconfig %s: resolve its relative paths: %w", f, err)
	}
	rc, err := restConfig(cfg, LoadOptions{Context: f.Context, Policy: Policy{AllowCredentialPlugins: true, AllowLocalFiles: true}})
	if err != nil {
		return nil, hash, fmt.Errorf("cluster kubeconfig %s: %w", f, err)
	}
	return rc, hash, nil
}

// fileParams are what ProvideFiles' provider is built from.
type fileParams struct {
	fx.In

	Logger *zap.Logger `optional:"true"`
}

// ProvideFiles adds a FileProvider with opts to the app's cluster
// providers, or nothing when opts names no file. It logs with the app's
// logger unless opts.Logger is set.
func ProvideFiles(opts FileOptions) fx.Option {
	if len(opts.Files) == 0 {
		return fx.Options()
	}
	return fx.Provide(fx.Annotate(func(p fileParams) (fxcluster.Provider, error) {
		o := opts
		if o.Logger == nil && p.Logger != nil {
			o.Logger = p.Logger.Named("kubeconfig")
		}
		return NewFileProvider(o)
	}, fx.ResultTags(`group:"`+contract.ClusterProvidersGroup+`"`)))
}

// Load reads f's kubeconfig and returns the rest config of its context,
// as FileProvider would engage it.
func (f File) Load() (*rest.Config, error) {
	cfg, _, err := loadFile(f)
	return cfg, err
}
