package testrig

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
)

func TestProcesses(t *testing.T) {
	cmd := exec.Command("sleep", "7319")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	found := ProcessesWith("sleep 7319")
	if len(found) != 1 || found[0].PID != pid || found[0].Cmdline() != "sleep 7319" || found[0].Comm() != "sleep" {
		t.Errorf("ProcessesWith = %+v, want the sleep %d", found, pid)
	}
	if len(ProcessesWith("7319\x00")) != 1 {
		t.Error("an argument is not found with its NUL end")
	}
	st, ok := ReadStat(pid)
	if !ok || st.PPID != os.Getpid() || st.PGID != pid || !st.Live() {
		t.Errorf("ReadStat = %+v, %v; want child of %d in its own group", st, ok, os.Getpid())
	}
	if got := GroupMembers(pid); !slices.Equal(got, []int{pid}) {
		t.Errorf("GroupMembers = %v, want [%d]", got, pid)
	}
	for _, p := range Processes(nil) {
		if p.PID == os.Getpid() {
			t.Error("Processes lists the caller")
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if len(ProcessesWith("sleep 7319")) != 0 || len(GroupMembers(pid)) != 0 {
		t.Error("the killed sleep is still listed")
	}
	if _, ok := ReadStat(pid); ok {
		t.Error("ReadStat of a reaped process is ok")
	}
	if GroupMembers(0) != nil {
		t.Error("GroupMembers(0) lists processes")
	}
}
