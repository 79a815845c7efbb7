//go:build linux && local

package fxkube_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fxkube/fxkube/internal/controlplane"
	"github.com/fxkube/fxkube/internal/testenv"
)

// The shell commands of README.md and docs/ run as written, in the order a
// reader meets them, and print what the docs say they print.
//
// The docs are read in the README's order: the README, then each page
// under docs/ in the order it first links them, then the pages it does
// not link. Every command of a ```sh block is a row of docSteps, run or
// skipped with a reason. A command with no row fails the test, as does a
// row no doc has: the docs cannot gain a command the test does not know.
//
// The first `make run` starts the example app on a local control plane,
// which stands in for "your own cluster" later. The test then plays the
// second terminal: each command runs in bash from the repository's root,
// after the docs' export and alias lines seen so far. Four things differ
// from a reader's run, so that the test leaves nothing behind and binds
// only to 127.0.0.1:
//   - `make run` gets LOCAL_APP in a temporary directory and ARGS with free
//     loopback ports for the probes and metrics;
//   - `-o fxkube` and `./fxkube` name a binary in a temporary directory;
//   - `./fxkube run` gets a free loopback port for its probes;
//   - `~/.kube/config` names the kubeconfig `make run` printed.
func TestDocsShellCommands(t *testing.T) {
	require.NoError(t, controlplane.Check(controlplane.Dir()), "make run uses the cache's binaries")
	commands := docsShellCommands(t)
	seen := map[string]bool{}
	for _, c := range commands {
		seen[c.key] = true
		if _, ok := docSteps[c.key]; !ok {
			t.Errorf("%s:%d: %q is neither run nor skipped: add a row to docSteps", c.doc, c.line, c.key)
		}
	}
	for key := range docSteps {
		if !seen[key] {
			t.Errorf("docSteps has a row for %q, which no doc has: delete it", key)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	s := newDocSession(t)
	ran := 0
	for _, c := range commands {
		step := docSteps[c.key]
		ok := t.Run(fmt.Sprintf("%s:%d", filepath.Base(c.doc), c.line), func(t *testing.T) {
			if step.skip != "" {
				t.Skipf("%s: %s", c.key, step.skip)
			}
			s.t = t
			s.do(c, step)
		})
		if !ok {
			break // the commands that follow build on this one
		}
		if step.skip == "" {
			ran++
		}
	}
	s.t = t
	t.Logf("ran %d of the docs' %d shell commands", ran, len(commands))
}

// docStep says how TestDocsShellCommands runs a command of the docs, or
// why it does not. A zero docStep runs the command and wants it to exit 0.
type docStep struct {
	// skip, if set, is why the command is not run.
	skip string
	// run, if set, runs the command instead of bash.
	run func(s *docSession, c shellCommand)
	// want checks the command's output. While it returns an error the
	// command runs again, for up to 30 seconds: the controllers work
	// asynchronously, and a reader types slowly. Only commands that change
	// nothing have one.
	want func(s *docSession, out string) error
	// then checks, after the command, what it did, retried as want is.
	then func(s *docSession) error
}

// skipMakeTest is why `make test` is not run.
const skipMakeTest = "runs every test, this one included; CI runs it"

// docSteps has a row for every shell command of the docs, keyed by its
// first line with its comment, spaces collapsed. The comment is part of
// the key: it says what the command prints, which the row checks.
var docSteps = map[string]docStep{
	// README.md
	"go get github.com/fxkube/fxkube@latest": {
		skip: "adds fxkube to the reader's own module, from the module proxy; the tests build this checkout",
	},
	"make run # builds a local kube-apiserver + etcd once, then runs the example modules on it": {run: (*docSession).makeRun},
	"make test # every test, with -race, against a real API server":                             {skip: skipMakeTest},

	// docs/guides/example-app.md
	"make run": {run: (*docSession).makeRun},
	"export KUBECONFIG=/tmp/fxkube-local-.../kubeconfig # as printed by make run": {run: (*docSession).exportKubeconfig},
	`alias kubectl="$(make -s controlplane)/kubectl"`:                             {run: (*docSession).aliasKubectl},
	"kubectl create namespace shared":                                             {},
	"kubectl create namespace team-a":                                             {},
	"kubectl create namespace team-b":                                             {},
	"kubectl apply -f - <<'YAML'":                                                 {},
	"kubectl get configmaps -A -l fxkube.io/mirrored=true # copies in team-a and team-b": {
		want: mirroredIn("team-a", "team-b"),
	},
	`kubectl -n shared patch configmap settings --type merge -p '{"data":{"color":"red"}}'`: {},
	`kubectl -n team-b get configmap settings -o jsonpath='{.data.color}{"\n"}' # red`: {
		want: prints("red\n"),
	},
	"kubectl -n shared annotate configmap settings --overwrite fxkube.io/mirror-to=team-a,team-c": {},
	"kubectl get configmaps -A -l fxkube.io/mirrored=true # only team-a":                          {want: mirroredIn("team-a")},
	"kubectl events -n shared --for configmap/settings # CopyCreated, CopyDeleted, NamespaceNotFound (team-c)": {
		want: func(_ *docSession, out string) error {
			for _, reason := range []string{"CopyCreated", "CopyDeleted", "NamespaceNotFound"} {
				if !strings.Contains(out, " "+reason+" ") {
					return fmt.Errorf("no %s event", reason)
				}
			}
			if !regexp.MustCompile(`NamespaceNotFound .*team-c`).MatchString(out) {
				return errors.New("the NamespaceNotFound event does not name team-c")
			}
			return nil
		},
	},
	"kubectl -n shared delete configmap settings # and its copies go": {
		then: func(s *docSession) error {
			out, err := s.bash("kubectl get configmaps -A -l fxkube.io/mirrored=true -o name")
			if err == nil && out != "" {
				err = fmt.Errorf("copies left: %s", out)
			}
			return err
		},
	},
	"kubectl create namespace demo":                                             {},
	"kubectl -n demo create configmap app-config --from-literal=greeting=hello": {},
	"kubectl -n demo create deployment web --image=nginx":                       {},
	"kubectl -n demo set env deployment/web --from=configmap/app-config":        {},
	"kubectl -n demo annotate deployment web fxkube.io/reload=true":             {},
	`kubectl -n demo get deployment web -o jsonpath='{.spec.template.metadata.annotations.fxkube\.io/config-hash}{"\n"}'`: {
		want: func(s *docSession, out string) error {
			if strings.TrimSpace(out) == "" {
				return errors.New("no config hash yet")
			}
			s.configHash = out
			return nil
		},
	},
	`kubectl -n demo patch configmap app-config --type merge -p '{"data":{"greeting":"hi"}}'`: {},
	`kubectl -n demo get deployment web -o jsonpath='{.spec.template.metadata.annotations.fxkube\.io/config-hash}{"\n"}' # a new hash`: {
		want: func(s *docSession, out string) error {
			if strings.TrimSpace(out) == "" || out == s.configHash {
				return fmt.Errorf("the hash is still %q", out)
			}
			return nil
		},
	},
	"kubectl -n demo get events --field-selector involvedObject.name=web # ConfigHashSet, ConfigChanged": {
		want: printsAll(" ConfigHashSet ", " ConfigChanged "),
	},
	"go build -o fxkube ./cmd/app": {},
	`./fxkube describe # stores, who uses them, controllers: "7 store requests → 4 specs → 4 informers"`: {
		want: firstLine("7 store requests → 4 specs → 4 informers"),
	},
	"./fxkube describe -o json # the same as JSON (shape in `fxkube describe --help`)": {
		want: func(s *docSession, out string) error {
			var graph struct{ Requests, Specs, Informers int }
			if err := json.Unmarshal([]byte(out), &graph); err != nil {
				return err
			}
			if got := fmt.Sprintf("%d store requests → %d specs → %d informers", graph.Requests, graph.Specs, graph.Informers); got != "7 store requests → 4 specs → 4 informers" {
				return fmt.Errorf("not the same as the text: %s", got)
			}
			help, err := s.bash("./fxkube describe --help")
			if err == nil && !strings.Contains(help, "--output json prints a Graph object:") {
				err = errors.New("describe --help shows no JSON shape")
			}
			return err
		},
	},
	"./fxkube describe -o mermaid # the same as a Mermaid flowchart, which GitHub renders": {want: printsConceptsGraph},
	"./fxkube describe --cluster --kubeconfig ~/.kube/config # and the sharding group live: buckets and objects by replica": {
		want: printsGroup,
	},
	"kubectl create namespace ops # the namespace of its service account": {},
	"./fxkube rbac --service-account ops/fxkube | kubectl apply -f - # the RBAC the modules need": {
		then: func(s *docSession) error {
			out, err := s.bash("kubectl auth can-i watch deployments.apps --all-namespaces --as system:serviceaccount:ops:fxkube")
			if err == nil && out != "yes\n" {
				err = fmt.Errorf("the service account may not watch Deployments: %s", out)
			}
			return err
		},
	},
	"./fxkube run --kubeconfig ~/.kube/config # or in a pod, with its service account": {run: (*docSession).runUntilReady},

	// docs/concepts.md
	"go run ./cmd/app describe -o mermaid": {want: printsConceptsGraph},

	// docs/guides/write-a-module.md
	"go run ./cmd/app describe": {want: firstLine("7 store requests → 4 specs → 4 informers")},
	"go run ./cmd/app rbac --service-account ops/fxkube": {
		want: printsAll("kind: ClusterRole\n", "kind: ClusterRoleBinding\n", "  namespace: ops\n"),
	},

	// docs/guides/test-a-module.md and kubebuilder-operator.md
	"make test": {skip: skipMakeTest},
	"go run ./cmd/app rbac --crds config/crd/bases": {
		skip: "config/crd/bases is the reader's kubebuilder project's, whose cmd/app hosts the operator; " +
			"app's TestRBAC runs rbac --crds",
	},

	// docs/guides/shard-a-controller.md
	"make run ARGS=--replicas=3": {
		skip: "a second local control plane, with three replicas, would double the test's time; " +
			"app's TestLocalStopsCleanlyOnCtrlC/replicas runs local --replicas 2, and the app of the first make run stands in for the three",
	},
	"go run ./cmd/app describe --cluster": {want: printsGroup},

	// docs/guides/webhooks-and-metrics.md
	"./fxkube run --metrics-bind-address :8443": {
		skip: "binds every interface; test/metrics_test.go runs secure metrics against a real API server",
	},
	"./fxkube rbac --metrics-bind-address :8443 | kubectl apply -f -": {
		want: printsAll("clusterrole.rbac.authorization.k8s.io/fxkube-metrics-auth ", "clusterrole.rbac.authorization.k8s.io/fxkube-metrics-reader "),
	},

	// docs/reference/errors.md
	"./fxkube rbac --service-account ops/fxkube | kubectl apply -f -": {},

	// docs/guides/run-across-clusters.md
	"go build -tags local -o fleet ./cmd/fleet": {},
	`./fleet describe # what every member cluster is asked: "In every member cluster:"`: {
		want: printsAll("\nIn every member cluster:\n", "    fleet\n"),
	},
	"./fleet rbac --only members # the ClusterRole fleet-member, for each member": {
		want: printsAll("kind: ClusterRole\n", "  name: fleet-member\n"),
	},
	"./fleet local --members 2 # until Ctrl-C; prints /tmp/fleet-local-.../kubeconfig and member-1.kubeconfig, member-2.kubeconfig": {
		run: (*docSession).fleetLocal,
	},
	"kubectl --kubeconfig /tmp/fleet-local-.../kubeconfig create namespace demo":                                    {},
	"kubectl --kubeconfig /tmp/fleet-local-.../kubeconfig -n demo create configmap settings --from-literal=level=1": {},
	"kubectl --kubeconfig /tmp/fleet-local-.../kubeconfig -n demo label configmap settings fxkube.io/fleet=true":    {},
	`kubectl --kubeconfig /tmp/fleet-local-.../member-2.kubeconfig -n demo get configmap settings -o jsonpath='{.data.level}{"\n"}' # 1`: {
		want: prints("1\n"),
	},
	"curl -s 127.0.0.1:8081/readyz/cluster-member-1 # ok": {want: prints("ok")},
}

// prints wants the output to be want.
func prints(want string) func(*docSession, string) error {
	return func(_ *docSession, out string) error {
		if out != want {
			return fmt.Errorf("printed %q, not %q", out, want)
		}
		return nil
	}
}

// printsAll wants the output to hold each of parts.
func printsAll(parts ...string) func(*docSession, string) error {
	return func(_ *docSession, out string) error {
		for _, p := range parts {
			if !strings.Contains(out, p) {
				return fmt.Errorf("printed no %q", p)
			}
		}
		return nil
	}
}

// firstLine wants the output's first line to be want.
func firstLine(want string) func(*docSession, string) error {
	return func(_ *docSession, out string) error {
		if got, _, _ := strings.Cut(out, "\n"); got != want {
			return fmt.Errorf("first line %q, not %q", got, want)
		}
		return nil
	}
}

// mirroredIn wants `kubectl get configmaps -A` to list the copies of
// settings in namespaces, and no other.
func mirroredIn(namespaces ...string) func(*docSession, string) error {
	return func(_ *docSession, out string) error {
		var got []string
		for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
			fields := strings.Fields(line)
			if i == 0 || len(fields) < 2 {
				continue // the header
			}
			if fields[1] != "settings" {
				return fmt.Errorf("a copy of %s", fields[1])
			}
			got = append(got, fields[0])
		}
		if !slices.Equal(got, namespaces) {
			return fmt.Errorf("copies in %v, not %v", got, namespaces)
		}
		return nil
	}
}

// printsConceptsGraph wants the graph of docs/concepts.md.
func printsConceptsGraph(_ *docSession, out string) error {
	md, err := os.ReadFile("docs/concepts.md")
	if err != nil {
		return err
	}
	if graphs := fenced(string(md), "mermaid"); len(graphs) != 1 || out != graphs[0] {
		return fmt.Errorf("not the graph of docs/concepts.md:\n%s", out)
	}
	return nil
}

// groupLine is the shape of the first line of the group in
// shard-a-controller.md: "In the cluster now: 2 replicas running, ...".
var groupLine = regexp.MustCompile(`(?m)^In the cluster now: (\d+) replicas running, \d+ objects in 16 buckets, \d+ handovers:\n((?:  \S+: \d+ buckets \[[\d ]*\], \d+ objects\n)+)`)

// printsGroup wants describe --cluster to show the one replica of the
// app holding every bucket.
func printsGroup(_ *docSession, out string) error {
	m := groupLine.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("no group in the shape of shard-a-controller.md's:\n%s", out)
	}
	if m[1] != "1" || !strings.Contains(m[2], ": 16 buckets [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15], ") {
		return fmt.Errorf("not the one replica holding every bucket:\n%s", m[0])
	}
	return nil
}

// shellCommand is a command of a ```sh block of the docs.
type shellCommand struct {
	doc  string // the Markdown file
	line int    // the command's first line in doc
	text string // the command, here-document included
	key  string // its first line, comment included, spaces collapsed
}

// hereDoc matches the start of a here-document: <<'END' or <<END.
var hereDoc = regexp.MustCompile(`<<-?'?([A-Za-z_]+)'?`)

// docsShellCommands returns the commands of the ```sh blocks of the docs,
// in the README's order.
func docsShellCommands(t *testing.T) []shellCommand {
	t.Helper()
	var commands []shellCommand
	for _, doc := range docsInReadmeOrder(t) {
		md, err := os.ReadFile(doc)
		require.NoError(t, err)
		inBlock := false
		var cur *shellCommand
		end := "" // the here-document's terminator, while in one
		for i, line := range strings.Split(string(md), "\n") {
			trimmed := strings.TrimSpace(line)
			switch {
			case !inBlock:
				inBlock = trimmed == "```sh"
			case end != "":
				cur.text += "\n" + line
				if trimmed == end {
					end = ""
					commands = append(commands, *cur)
				}
			case trimmed == "```":
				inBlock = false
			case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			default:
				cur = &shellCommand{doc: doc, line: i + 1, text: line, key: strings.Join(strings.Fields(line), " ")}
				if m := hereDoc.FindStringSubmatch(line); m != nil {
					end = m[1]
					continue
				}
				commands = append(commands, *cur)
			}
		}
		require.False(t, inBlock, "%s: a ```sh block is not closed", doc)
	}
	require.NotEmpty(t, commands)
	return commands
}

// docsInReadmeOrder returns README.md, the Markdown files under docs/ in the
// order the README first links them, then the others under docs/.
func docsInReadmeOrder(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	docs := []string{"README.md"}
	for _, m := range mdLink.FindAllStringSubmatch(string(readme), -1) {
		target, _, _ := strings.Cut(m[1], "#")
		if strings.HasPrefix(target, "docs/") && strings.HasSuffix(target, ".md") && !slices.Contains(docs, target) {
			docs = append(docs, target)
		}
	}
	all, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	more, err := filepath.Glob("docs/*/*.md")
	require.NoError(t, err)
	for _, doc := range append(all, more...) {
		if !slices.Contains(docs, doc) {
			docs = append(docs, doc)
		}
	}
	return docs
}

// docSession is the reader's second terminal: the state of the export and
// alias lines run so far, and the app `make run` started.
type docSession struct {
	t       *testing.T // the command's
	top     *testing.T // the session's, which stops make run
	root    string     // the repository
	bin     string     // where the docs' binaries are built
	env     []string   // the environment of every command
	prelude []string   // the export and alias lines run so far

	app        *foreground // make run
	probes     string      // its /readyz's address
	kubeconfig string      // the kubeconfig it printed
	configHash string      // the rollout's hash, before the change

	fleetDir    string // where `./fleet local` wrote its kubeconfigs
	fleetProbes string // its /readyz's address
}

func newDocSession(t *testing.T) *docSession {
	root, err := os.Getwd()
	require.NoError(t, err)
	// As if typed in a terminal: not run by the make of `make test`, with
	// no KUBECONFIG but the one the docs export, and kubectl's discovery
	// cache out of the reader's home.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains([]string{"MAKEFLAGS", "MAKELEVEL", "MFLAGS", "KUBECONFIG", "KUBECACHEDIR"}, name)
	})
	return &docSession{t: t, top: t, root: root, bin: t.TempDir(), env: append(env, "KUBECACHEDIR="+t.TempDir())}
}

// do runs c as step says.
func (s *docSession) do(c shellCommand, step docStep) {
	if step.run != nil {
		step.run(s, c)
	} else {
		s.bashUntil(c, step.want)
	}
	if step.then != nil {
		s.eventually(c, step.then)
	}
}

// bashUntil runs c until want accepts its output, or once if want is nil.
func (s *docSession) bashUntil(c shellCommand, want func(*docSession, string) error) {
	s.t.Helper()
	if want == nil {
		out, err := s.bash(c.text)
		require.NoError(s.t, err, "%s:%d: %s\n%s", c.doc, c.line, c.key, out)
		return
	}
	s.eventually(c, func(s *docSession) error {
		out, err := s.bash(c.text)
		if err != nil {
			return err
		}
		return want(s, out)
	})
}

// eventually waits up to 30 seconds for check to return nil.
func (s *docSession) eventually(c shellCommand, check func(*docSession) error) {
	s.t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err = check(s); err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s:%d: %s: %v", c.doc, c.line, c.key, err)
		}
	}
}

// bash runs text in bash from the repository's root, after the prelude,
// and returns its standard output. An error carries its standard error.
func (s *docSession) bash(text string) (string, error) {
	script := strings.Join(append([]string{"shopt -s expand_aliases"}, append(s.prelude, s.rewrite(text))...), "\n")
	ctx, cancel := context.WithTimeout(s.t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = s.root, s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

// rewrite makes the docs' binaries temporary, and the reader's cluster the
// local one.
func (s *docSession) rewrite(text string) string {
	pairs := []string{
		"-o fxkube ", "-o " + filepath.Join(s.bin, "fxkube") + " ",
		"./fxkube ", filepath.Join(s.bin, "fxkube") + " ",
		"-o fleet ", "-o " + filepath.Join(s.bin, "fleet") + " ",
		"./fleet ", filepath.Join(s.bin, "fleet") + " ",
		"~/.kube/config", s.kubeconfig,
	}
	if s.fleetDir != "" {
		pairs = append(pairs, "/tmp/fleet-local-.../", s.fleetDir+"/", "127.0.0.1:8081", s.fleetProbes)
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// foreground is a command a reader runs in a terminal of its own: in a
// process group of its own, stopped with Ctrl-C when the session ends.
type foreground struct {
	name   string
	cmd    *exec.Cmd
	out    *testenv.Buffer
	exited chan struct{} // closed once err is set
	err    error
	// plane is every kube-apiserver and etcd seen under the command,
	// which must be gone once it has exited.
	plane []testenv.Process
}

// startForeground starts cmd, named name, in the session's directory and
// environment. When the session ends, it sends Ctrl-C, as a terminal
// sends it to its foreground process group, and hands stopped the exit
// status; it then requires the command's control planes gone.
func (s *docSession) startForeground(name string, cmd *exec.Cmd, stopped func(t *testing.T, err error)) *foreground {
	t := s.t
	f := &foreground{name: name, cmd: cmd, out: &testenv.Buffer{}, exited: make(chan struct{})}
	cmd.Dir, cmd.Env = s.root, s.env
	cmd.Stdout, cmd.Stderr = f.out, f.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	go func() { f.err = cmd.Wait(); close(f.exited) }()
	s.top.Cleanup(func() {
		t := s.top
		f.watch(t)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-f.exited:
			stopped(t, f.err)
		case <-time.After(time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-f.exited
			t.Errorf("%s: still running a minute after Ctrl-C; output:\n%s", name, f.out)
		}
		for _, p := range f.plane {
			if !assert.False(t, p.Alive(), "%s (pid %d) outlived %s", p.Name, p.PID, name) {
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	})
	return f
}

// watch records the kube-apiservers and etcds running under f now.
func (f *foreground) watch(t *testing.T) {
	for _, p := range testenv.Descendants(t, f.cmd.Process.Pid) {
		if (p.Name == controlplane.APIServer || p.Name == controlplane.Etcd) && !slices.Contains(f.plane, p) {
			f.plane = append(f.plane, p)
		}
	}
}

// waitReady waits until ready reports true, watching f's control planes
// meanwhile. It fails the test if f exits first, or after 3 minutes.
func (f *foreground) waitReady(t *testing.T, ready func() bool) {
	timeout := time.After(3 * time.Minute)
	for !ready() {
		f.watch(t)
		select {
		case <-f.exited:
			t.Fatalf("%s exited: %v; output:\n%s", f.name, f.err, f.out)
		case <-timeout:
			t.Fatalf("%s: not ready within 3m; output:\n%s", f.name, f.out)
		case <-time.After(100 * time.Millisecond):
		}
	}
	f.watch(t)
}

// makeRun starts `make run`, as a reader does in a first terminal, and
// waits for the app to be ready. Once it runs, a `make run` of a later
// guide finds it ready. It is stopped as a reader stops it, with Ctrl-C,
// when the test ends.
func (s *docSession) makeRun(c shellCommand) {
	t := s.t
	if s.app != nil {
		require.Equal(t, http.StatusOK, testenv.Status(s.probes, "/readyz"), "the app of the first make run is ready")
		return
	}
	s.probes = testenv.LoopbackAddr(t)
	metrics := testenv.LoopbackAddr(t)
	args := append(strings.Fields(c.text)[1:], "LOCAL_APP="+filepath.Join(s.bin, "fxkube-local"),
		"ARGS=--health-probe-bind-address "+s.probes+" --metrics-bind-address "+metrics)
	s.app = s.startForeground("make run", exec.Command("make", args...), func(t *testing.T, err error) {
		// make, interrupted, ends itself with the signal once the app has.
		var exit *exec.ExitError
		if err != nil && (!errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT) {
			t.Errorf("make run: %v; output:\n%s", err, s.app.out)
		}
		assert.NotContains(t, s.app.out.String(), "make: ***")
		assert.NotContains(t, s.app.out.String(), "Error:")
		assert.Contains(t, s.app.out.String(), "stopping")
	})
	s.app.waitReady(t, func() bool { return testenv.Status(s.probes, "/readyz") == http.StatusOK })
	require.NotEmpty(t, s.app.plane, "a kube-apiserver and etcd run under make run")
	assert.Equal(t, http.StatusOK, testenv.Status(metrics, "/metrics"), "plain HTTP metrics")
}

// fleetLocal starts `./fleet local`, as a reader does in a terminal of
// its own, with its probes on a free loopback port and no metrics. It
// waits until the app and both members are ready, and takes the
// directory of the kubeconfigs it printed. It is stopped as a reader
// stops it, with Ctrl-C, when the test ends: it must exit 0.
func (s *docSession) fleetLocal(c shellCommand) {
	t := s.t
	probes := testenv.LoopbackAddr(t)
	command, _, _ := strings.Cut(s.rewrite(c.text), " #") // no shell to drop the comment
	args := append(strings.Fields(command), "--health-probe-bind-address", probes, "--metrics-bind-address", "0")
	var fleet *foreground
	fleet = s.startForeground("fleet local", exec.Command(args[0], args[1:]...), func(t *testing.T, err error) {
		assert.NoError(t, err, "fleet local: exit status; output:\n%s", fleet.out)
	})
	fleet.waitReady(t, func() bool {
		for _, path := range []string{"/readyz", "/readyz/cluster-member-1", "/readyz/cluster-member-2"} {
			if testenv.Status(probes, path) != http.StatusOK {
				return false
			}
		}
		return true
	})
	require.NotEmpty(t, fleet.plane, "kube-apiservers and etcds run under fleet local")
	out := fleet.out
	printed := regexp.MustCompile(`(?m)^  export KUBECONFIG=(/\S+)/kubeconfig$`).FindStringSubmatch(out.String())
	require.NotNil(t, printed, "fleet local printed no kubeconfig; output:\n%s", out)
	for _, member := range []string{"member-1", "member-2"} {
		require.Contains(t, out.String(), "\n  "+printed[1]+"/"+member+".kubeconfig\n", "the kubeconfig of %s", member)
	}
	s.fleetDir, s.fleetProbes = printed[1], probes
}

// exportKubeconfig runs the export line with the path `make run` printed,
// which must have the shape the line shows.
func (s *docSession) exportKubeconfig(c shellCommand) {
	shown := regexp.MustCompile(`^export KUBECONFIG=(\S+)`).FindStringSubmatch(c.text)
	require.NotNil(s.t, shown, c.text)
	pattern := strings.ReplaceAll(regexp.QuoteMeta(shown[1]), `\.\.\.`, `[^/\s]+`)
	printed := regexp.MustCompile(`(?m)^  export KUBECONFIG=(` + pattern + `)$`).FindStringSubmatch(s.app.out.String())
	require.NotNil(s.t, printed, "make run printed no kubeconfig like %s; output:\n%s", shown[1], s.app.out)
	s.kubeconfig = printed[1]
	s.keep(strings.Replace(c.text, shown[1], s.kubeconfig, 1))
}

// aliasKubectl runs the alias line, which must make kubectl the control
// plane's, not one on PATH.
func (s *docSession) aliasKubectl(c shellCommand) {
	s.keep(c.text)
	out, err := s.bash("type kubectl")
	require.NoError(s.t, err)
	assert.Contains(s.t, out, filepath.Join(controlplane.Dir(), controlplane.Kubectl), "the alias names the control plane's kubectl")
	out, err = s.bash("kubectl version")
	require.NoError(s.t, err, out)
	assert.Contains(s.t, out, "Server Version: "+controlplane.KubernetesVersion)
}

// keep runs a line that sets state, such as an export, and keeps it for
// the commands that follow.
func (s *docSession) keep(line string) {
	out, err := s.bash(line)
	require.NoError(s.t, err, "%s\n%s", line, out)
	s.prelude = append(s.prelude, line)
}

// runUntilReady runs the app, with its probes on a loopback port, until
// it is ready, then sends it SIGTERM: it must exit 0.
func (s *docSession) runUntilReady(c shellCommand) {
	t := s.t
	probes := testenv.LoopbackAddr(t)
	command, _, _ := strings.Cut(s.rewrite(c.text), " #") // no shell to drop the comment
	args := append(strings.Fields(command), "--health-probe-bind-address", probes)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Env = s.root, s.env
	out := &testenv.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	var waitErr error
	exited := make(chan struct{}) // closed once waitErr is set
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("run: killed; output:\n%s", out)
		}
	}()
	for deadline := time.Now().Add(time.Minute); testenv.Status(probes, "/readyz") != http.StatusOK; {
		select {
		case <-exited:
			t.Fatalf("run exited: %v; output:\n%s", waitErr, out)
		case <-time.After(100 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "run: not ready within 1m; output:\n%s", out)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-exited:
		require.NoError(t, waitErr, "run: exit status; output:\n%s", out)
	case <-time.After(time.Minute):
		t.Fatal("run: still running a minute after SIGTERM")
	}
	assert.Contains(t, out.String(), "the Leases of leader election and sharding go to the kubeconfig context's namespace")
}
