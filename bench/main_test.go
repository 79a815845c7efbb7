package bench

import (
	"flag"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fxkube/fxkube/internal/testenv"
)

// TestMain runs one of four things:
//
//   - a child measuring one system (see runChild), when childEnv is set;
//   - a replica of the sharded workload (see runReplica), when replicaEnv
//     is set;
//   - the benchmarks, with -bench: against a control plane started for this
//     run, printing the table of results at the end;
//   - otherwise only the cheap checks, with no control plane, so that
//     `go test ./...` stays fast.
func TestMain(m *testing.M) {
	if params, ok := os.LookupEnv(childEnv); ok {
		os.Exit(runChild(params))
	}
	if params, ok := os.LookupEnv(replicaEnv); ok {
		os.Exit(runReplica(params))
	}
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		goleak.VerifyTestMain(m)
		return
	}
	klog.SetLogger(logr.Discard())
	ctrllog.SetLogger(logr.Discard())
	results.loadAtStart = loadAverage()
	goleak.VerifyTestMain(withTable{testenv.WithControlPlane(m)})
}

// withTable prints the tables of results after the benchmarks have run.
type withTable struct{ m interface{ Run() int } }

func (t withTable) Run() int {
	code := t.m.Run()
	results.print(os.Stdout)
	printShards(os.Stdout, shardResults)
	printKinds(os.Stdout, kindResults)
	return code
}
