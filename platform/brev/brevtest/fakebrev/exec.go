package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/platform/brev/brevtest/internal/fakestate"
)

func (a *app) execCmd() *cobra.Command {
	var host bool
	cmd := &cobra.Command{
		Use:   "exec [instance...] <command>",
		Short: "Execute a command on one or more instances",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.exec(args, host)
		},
	}
	cmd.Flags().BoolVar(&host, "host", false, "SSH into the host machine instead of the container")
	return cmd
}

// exec is brev exec, v0.6.320+ ("fire-first"): the last argument is the
// command, every earlier one (and every stdin line) an instance name.
func (a *app) exec(args []string, host bool) error {
	command := args[len(args)-1]
	names, err := a.names(args[:len(args)-1])
	if err != nil {
		return err
	}
	if command == "" {
		return errors.New("command is required")
	}
	if path, ok := strings.CutPrefix(command, "@"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		command = string(b)
	}
	if len(names) == 0 {
		return errNameRequired
	}
	var errs []error
	for _, name := range names {
		if len(names) > 1 {
			fmt.Fprintf(a.stderr, "\n=== %s ===\n", name)
		}
		err := a.execOne(name, command, host)
		if err == nil {
			continue
		}
		if len(names) == 1 {
			return err
		}
		fmt.Fprintf(a.stderr, "Error on %s: %v\n", name, err)
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return multiError(errs)
	}
	return nil
}

// execOne runs command on one instance the way brev does: ssh to the
// literal alias first; on any non-zero exit (a remote command's own
// failure included) look the instance up, refresh, and run it again.
func (a *app) execOne(name, command string, host bool) error {
	alias := name
	if host {
		alias += "-host"
	}
	var transient bool
	if err := fakestate.Update(a.dir, func(s *fakestate.State) error {
		transient = s.TakeFaultFor(fakestate.FaultExecTransient, name, command)
		return nil
	}); err != nil {
		return err
	}
	if transient {
		fmt.Fprintln(a.stderr, "Connection failed, checking instance status...")
		return fmt.Errorf("could not connect to instance %q: \nssh: connect to host 127.0.0.1 port 22: Connection refused\nPlease check with: brev ls", name)
	}

	code, err := a.ssh(alias, command, 5)
	if err != nil {
		return err
	}
	if code == 0 {
		a.printName(name)
		return nil
	}
	sshErr := fmt.Sprintf("exit status %d", code)
	fmt.Fprintln(a.stderr, "Connection failed, checking instance status...")

	var inst fakestate.Instance
	var found, started bool
	if err := fakestate.Update(a.dir, func(s *fakestate.State) error {
		i := s.Find(name)
		if i == nil {
			return nil
		}
		found = true
		if i.Status == fakestate.Stopped {
			// brev starts it (billing) and polls until RUNNING.
			i.SetStatus(fakestate.Running)
			i.PowerOn()
			started = true
		}
		inst = *i
		return nil
	}); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("ssh connection failed and could not look up instance %q: %s\nPlease check your instances with: brev ls",
			name, stackError(sshErr, "cmd/util.ResolveWorkspaceForSSH"))
	}
	if started {
		fmt.Fprintf(a.stdout, "Instance %s is starting. \n\n", name)
	}
	if inst.Status != fakestate.Running {
		return fmt.Errorf("instance %q is in state %q — please check with: brev ls", name, inst.Status)
	}
	if err := a.refresh(); err != nil {
		return fmt.Errorf("refresh: %w", err)
	}
	resolved := inst.Name
	if host {
		resolved += "-host"
	}
	if err := a.waitForSSH(name, resolved); err != nil {
		return err
	}
	code, err = a.ssh(resolved, command, 10)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("exit status %d", code)
	}
	a.printName(name)
	return nil
}

// printName is brev's fmt.Println(name) after a success when stdout is
// not a terminal, glued to the output's last line when that lacks a
// newline.
func (a *app) printName(name string) {
	if !a.stdoutTTY {
		fmt.Fprintln(a.stdout, name)
	}
}

// sshConfig is the config every ssh the fake runs reads: the user's, which
// refresh makes include ~/.brev/ssh_config. (OpenSSH finds ~/.ssh/config
// through the password database, not $HOME, hence -F.)
func (a *app) sshConfig() string {
	return filepath.Join(a.home, ".ssh", "config")
}

// ssh runs the command on alias with stdin /dev/null, stdout and stderr
// streamed through, and returns ssh's exit code (255: ssh itself failed).
// As brev does (runSSHWithTimeout), it runs ssh through `bash -c LINE`,
// with the command single-quoted in LINE, each single quote growing to
// four bytes (brevQuote): so the kernel's cap on one argument (128 KiB,
// MAX_ARG_STRLEN) applies to the quoted command as it does under brev
// ("argument list too long").
func (a *app) ssh(alias, command string, connectTimeout int) (int, error) {
	line := "ssh -F " + brevQuote(a.sshConfig()) + " -T -o ConnectTimeout=" + strconv.Itoa(connectTimeout) +
		" -o BatchMode=yes -o LogLevel=ERROR " + alias + " " + brevQuote(command)
	cmd := exec.Command("bash", "-c", line)
	cmd.Stdout, cmd.Stderr = a.stdout, a.stderr
	a.call.Runs++
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("run ssh: %w", err)
	}
	return 0, nil
}

// brevQuote is how brev puts the command into bash's command line.
func brevQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// waitForSSH is brev's WaitForSSHToBeAvailable: probe with `echo " "`,
// retrying (1 s apart, 41 tries) only on the errors brev deems transient.
func (a *app) waitForSSH(name, alias string) error {
	var line string
	for try := 0; try < 41; try++ {
		if try > 0 {
			time.Sleep(time.Second)
		}
		out, err := exec.Command("ssh", "-F", a.sshConfig(), "-T", "-o", "ConnectTimeout=10",
			"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", alias, `echo " "`).CombinedOutput()
		if err == nil {
			return nil
		}
		line = strings.TrimSpace(string(out))
		if first, _, ok := strings.Cut(line, "\n"); ok {
			line = first
		}
		transient := false
		for _, s := range []string{"Connection refused", "Operation timed out", "Connection timed out", "Warning:"} {
			transient = transient || strings.Contains(string(out), s)
		}
		if !transient {
			break
		}
	}
	return fmt.Errorf("could not connect to instance %q: \n%s\nPlease check with: brev ls", name, line)
}
