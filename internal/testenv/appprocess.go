package testenv

import (
	"os/exec"
	"testing"
)

// AppProcess is a process of an app's binary that a test runs, as a
// replica: its output is kept, its probes listen on a free loopback port
// and its metrics are off. It is killed, if it still runs, when the test
// ends.
type AppProcess struct {
	Name   string
	Cmd    *exec.Cmd
	Logs   *Buffer
	Probes string
	// Exited receives Wait's error once the process has exited.
	Exited chan error
}

// StartAppProcess starts bin's run command with args, as the process
// name.
func StartAppProcess(tb testing.TB, bin, name string, args ...string) *AppProcess {
	tb.Helper()
	p := &AppProcess{Name: name, Logs: &Buffer{}, Probes: LoopbackAddr(tb), Exited: make(chan error, 1)}
	p.Cmd = exec.Command(bin, append([]string{"run", "--health-probe-bind-address", p.Probes, "--metrics-bind-address", "0"}, args...)...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.Logs, p.Logs
	if err := p.Cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() { p.Exited <- p.Cmd.Wait() }()
	tb.Cleanup(func() {
		if p.Cmd.ProcessState == nil {
			_ = p.Cmd.Process.Kill()
			tb.Logf("killed %s: %v", p.Name, <-p.Exited)
		}
	})
	return p
}
