package kubeconfig_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fxkube/fxkube/fxcluster"
	"github.com/fxkube/fxkube/fxcluster/kubeconfig"
)

func TestParseFile(t *testing.T) {
	tests := []struct {
		give    string
		want    kubeconfig.File
		wantErr string
	}{
		{give: "eu=/etc/fleet/eu.kubeconfig", want: kubeconfig.File{Name: "eu", Path: "/etc/fleet/eu.kubeconfig"}},
		{give: "us.east=fleet.yaml@kubernetes-admin@us", want: kubeconfig.File{Name: "us.east", Path: "fleet.yaml", Context: "kubernetes-admin@us"}},
		{give: "a=b=c", want: kubeconfig.File{Name: "a", Path: "b=c"}},
		{give: "/etc/fleet/eu.kubeconfig", wantErr: `cluster kubeconfig "/etc/fleet/eu.kubeconfig": want NAME=PATH[@CONTEXT], such as eu=/etc/fleet/eu.kubeconfig`},
		{give: "=/x", wantErr: `cluster kubeconfig "=/x": the name "" is not a cluster name (a DNS subdomain, such as eu-west-1): `},
		{give: "EU=/x", wantErr: `the name "EU" is not a cluster name`},
		{give: "eu=", wantErr: `cluster kubeconfig "eu=": the path is empty; write NAME=PATH[@CONTEXT]`},
		{give: "eu=@ctx", wantErr: `the path is empty`},
		{give: "eu=/x@", wantErr: `cluster kubeconfig "eu=/x@": the context after "@" is empty; drop the "@" to use the file's current-context`},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, err := kubeconfig.ParseFile(tt.give)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.give, got.String())
		})
	}
}

// TestFilesFlag: Files is a repeatable flag whose errors name the value.
func TestFilesFlag(t *testing.T) {
	var files kubeconfig.Files
	fs := pflag.NewFlagSet("app", pflag.ContinueOnError)
	fs.Var(&files, "cluster-kubeconfig", "a member cluster's kubeconfig")
	require.NoError(t, fs.Parse([]string{"--cluster-kubeconfig=eu=/eu", "--cluster-kubeconfig", "us=/all@us"}))
	require.Equal(t, kubeconfig.Files{{Name: "eu", Path: "/eu"}, {Name: "us", Path: "/all", Context: "us"}}, files)
	require.Equal(t, "eu=/eu,us=/all@us", fs.Lookup("cluster-kubeconfig").Value.String())
	require.ErrorContains(t, fs.Parse([]string{"--cluster-kubeconfig=eu"}), `cluster kubeconfig "eu": want NAME=PATH[@CONTEXT]`)
}

func TestNewFileProvider(t *testing.T) {
	_, err := kubeconfig.NewFileProvider(kubeconfig.FileOptions{Files: []kubeconfig.File{
		{Name: "eu", Path: "/a"}, {Name: "eu", Path: "/b", Context: "x"}, {Name: "Bad", Path: "/c"},
	}})
	require.ErrorContains(t, err, "cluster eu is named twice, by eu=/a and eu=/b@x; give each cluster its own name")
	require.ErrorContains(t, err, `the name "Bad" is not a cluster name`)
}

// writeFile writes data to path as an operator would: at once, by rename.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// TestFileProvider engages trusted files, with their plugins and
// relative paths, and follows them as they change.
func TestFileProvider(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("ca"), 0o600))
	trusted := func(c *clientcmdapi.Config) {
		execPlugin(c)
		c.Clusters["one"].CertificateAuthorityData = nil
		c.Clusters["one"].CertificateAuthority = "ca.crt"
	}
	eu, all := filepath.Join(dir, "eu.kubeconfig"), filepath.Join(dir, "all.kubeconfig")
	writeFile(t, eu, kubeconfigOf(t, trusted))
	writeFile(t, all, kubeconfigOf(t, nil))

	core, logs := observer.New(zap.InfoLevel)
	p, err := kubeconfig.NewFileProvider(kubeconfig.FileOptions{
		Files:        []kubeconfig.File{{Name: "eu", Path: eu}, {Name: "us", Path: all, Context: "b"}},
		PollInterval: 10 * time.Millisecond,
		Logger:       zap.New(core),
	})
	require.NoError(t, err)
	aware := &recorder{engaged: make(chan engagement, 10)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx, aware) }()

	euCluster := aware.next(t, "eu")
	require.Equal(t, "aws", euCluster.cfg.ExecProvider.Command)
	require.Equal(t, filepath.Join(dir, "ca.crt"), euCluster.cfg.CAFile)
	us := aware.next(t, "us")
	require.Equal(t, "https://two.example:6443", us.cfg.Host)

	// A changed file reconnects its cluster only.
	writeFile(t, eu, kubeconfigOf(t, func(c *clientcmdapi.Config) { c.Clusters["one"].Server = "https://moved.example" }))
	requireLeft(t, euCluster)
	euCluster = aware.next(t, "eu")
	require.Equal(t, "https://moved.example", euCluster.cfg.Host)
	requireEngaged(t, us)

	// A broken file keeps its cluster, and says so once.
	writeFile(t, eu, []byte("{half: [written"))
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("not reloaded").Len() > 0 }, waitFor, time.Millisecond)
	require.NoError(t, os.Remove(eu))
	require.Eventually(t, func() bool { return logs.FilterMessageSnippet("not reloaded").Len() > 1 }, waitFor, time.Millisecond)
	requireEngaged(t, euCluster)
	writeFile(t, eu, kubeconfigOf(t, nil))
	requireLeft(t, euCluster)
	euCluster = aware.next(t, "eu")
	require.Equal(t, "https://one.example:6443", euCluster.cfg.Host)
	problems := logs.FilterMessageSnippet("not reloaded").All()
	require.Len(t, problems, 2)
	require.Contains(t, problems[0].ContextMap()["error"], "cluster kubeconfig eu="+eu+": parse: ")
	require.Contains(t, problems[1].ContextMap()["error"], "cluster kubeconfig eu="+eu+": open "+eu+": no such file or directory; fix the path")

	cancel()
	require.NoError(t, <-done)
	requireLeft(t, euCluster)
	requireLeft(t, us)
}

// TestFileProviderStart: a file that cannot be loaded, or a cluster
// Engage refuses, fails Start, which leaves no cluster engaged.
func TestFileProviderStart(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.kubeconfig")
	writeFile(t, good, kubeconfigOf(t, nil))
	missing := filepath.Join(dir, "missing.kubeconfig")
	tests := []struct {
		name    string
		give    []kubeconfig.File
		refuse  fxcluster.ClusterName
		wantErr []string
	}{
		{
			name: "missing file and context",
			give: []kubeconfig.File{{Name: "a", Path: missing}, {Name: "b", Path: good, Context: "nope"}},
			wantErr: []string{
				"cluster kubeconfig a=" + missing + ": open " + missing + ": no such file or directory; fix the path",
				"cluster kubeconfig b=" + good + `@nope: kubeconfig has no context "nope"; its contexts are: a, b`,
			},
		},
		{
			name:    "refused",
			give:    []kubeconfig.File{{Name: "a", Path: good}, {Name: "b", Path: good}},
			refuse:  "b",
			wantErr: []string{"cluster kubeconfig b=" + good + `: cluster name "b" is taken by another provider`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := kubeconfig.NewFileProvider(kubeconfig.FileOptions{Files: tt.give})
			require.NoError(t, err)
			aware := &recorder{engaged: make(chan engagement, 10), refuse: map[fxcluster.ClusterName]bool{tt.refuse: true}}
			err = p.Start(t.Context(), aware)
			for _, want := range tt.wantErr {
				require.ErrorContains(t, err, want)
			}
			close(aware.engaged)
			for e := range aware.engaged {
				requireLeft(t, e)
			}
		})
	}
}

// TestProvideFiles: no file, no provider; files, one provider.
func TestProvideFiles(t *testing.T) {
	for _, files := range []kubeconfig.Files{nil, {{Name: "eu", Path: "/eu"}}} {
		var providers []fxcluster.Provider
		fxtest.New(t, kubeconfig.ProvideFiles(kubeconfig.FileOptions{Files: files}),
			fx.Invoke(fx.Annotate(func(ps []fxcluster.Provider) { providers = ps }, fx.ParamTags(`group:"fxkube.cluster-providers"`))),
		).RequireStart().RequireStop()
		require.Len(t, providers, len(files))
	}
}
