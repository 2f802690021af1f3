// Command fakebrev is a stand-in for NVIDIA's `brev` CLI in tests: it keeps
// a fake cloud of instances in a state directory (env TF_FAKEBREV) and
// reproduces the real CLI's argument parsing, output and quirks (see
// docs/design.md §6.1): stdin read as names when it is not a char device,
// exec's fire-first ssh with a replay of failed commands, exit codes that
// are only ever 0 or 1, orphans after a failed create, names that stay
// taken while DELETING, and so on. A client that is naive about
// any of them breaks against it the way it would against the real one.
//
// The brevtest package builds it, points it at a test sshd and reads its
// state and call log; see that package for the knobs.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/platform/brev/brevtest/internal/fakestate"
)

func main() {
	os.Exit(run())
}

// app is one invocation of the fake.
type app struct {
	dir  string // the state directory
	home string // $HOME: ~/.brev and ~/.ssh live here
	opts fakestate.Options

	stdout, stderr io.Writer
	stdinPiped     bool // stdin is not a char device: brev reads it as names
	stdoutTTY      bool // stdout is a char device: brev prints for people

	call *fakestate.Call
}

// run executes one invocation and returns its exit status: always 0 or 1,
// as the real brev's main does (os.Exit(1) on any error).
func run() (code int) {
	start := time.Now()
	dir := os.Getenv(fakestate.EnvDir)
	if dir == "" {
		fmt.Fprintf(os.Stderr, "fake brev: %s is not set: it must name the fake's state directory (brevtest.Start sets it up; use Fake.Env())\n", fakestate.EnvDir)
		return 1
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		fmt.Fprintf(os.Stderr, "fake brev: %s=%s is not a directory: create it, or use brevtest.Start\n", fakestate.EnvDir, dir)
		return 1
	}
	if len(os.Args) == 3 && os.Args[1] == poweroffArg {
		return powerOff(dir, os.Args[2])
	}
	a := &app{
		dir:        dir,
		stdout:     os.Stdout,
		stderr:     os.Stderr,
		stdinPiped: !isCharDevice(os.Stdin),
		stdoutTTY:  isCharDevice(os.Stdout),
		call: &fakestate.Call{
			Args:  append([]string{}, os.Args[1:]...),
			Start: start.UnixNano(),
			Env:   os.Environ(),
		},
	}
	a.call.StdinPiped = a.stdinPiped
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "fake brev: panic: %v\n", r)
			code = 1
		}
		a.call.ExitCode = code
		a.call.End = time.Now().UnixNano()
		if err := fakestate.AppendCall(dir, *a.call); err != nil {
			fmt.Fprintf(os.Stderr, "fake brev: %v\n", err)
			code = 1
		}
	}()
	if err := a.main(os.Args[1:]); err != nil {
		fmt.Fprintln(a.stderr, err)
		return 1
	}
	return 0
}

func (a *app) main(args []string) error {
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("fake brev: %w: set HOME", err)
	}
	a.home = home
	st, err := fakestate.Read(a.dir)
	if err != nil {
		return fmt.Errorf("fake brev: %w", err)
	}
	a.opts = st.Options
	if a.opts.Banner != "" {
		fmt.Fprintln(a.stdout, a.opts.Banner)
	}
	version := false
	for _, arg := range args {
		version = version || arg == "--version" || arg == "-v"
	}
	switch {
	case version && a.opts.OnboardingPrompt:
		// brev v0.6.317 prints its version, then runs its onboarding,
		// which prompts and fails on stdin /dev/null.
		a.call.Command = "version"
		fmt.Fprintf(a.stdout, "Current Version: %s\n", a.opts.EffVersion())
		fmt.Fprint(a.stdout, "Welcome to Brev! Let's set up your workspace. Press Enter to continue: ")
		return errors.New("EOF")
	case !version && a.opts.LoggedOut && len(args) > 0 && args[0] != "login" && args[0] != "help" && args[0] != "search":
		// (search reads the public catalogue: no login needed.)
		// Every command that needs the API prompts for a login on stdout
		// and reads stdin: /dev/null ends it with EOF.
		a.call.Command = args[0]
		fmt.Fprint(a.stdout, "You are currently logged out, would you like to log in? [Y/n]: ")
		return errors.New("EOF")
	}

	root := a.rootCmd()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	switch {
	case cmd == nil || cmd == root:
		if v, _ := root.Flags().GetBool("version"); v && err == nil {
			a.call.Command = "version"
		}
	default:
		a.call.Command = cmd.Name()
	}
	return err
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "brev",
		Short:         "brev client for managing workspaces (fake)",
		Version:       a.opts.EffVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("Current Version: {{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().Bool("no-check-latest", false, "do not check for the latest version")
	root.PersistentFlags().String("user", "", "non root user to use for per user configuration of commands run as root")
	root.AddCommand(a.lsCmd(), a.createCmd(), a.refreshCmd(), a.execCmd(),
		a.deleteCmd(), a.stopCmd(), a.startCmd(), a.searchCmd())
	return root
}

// isCharDevice reports whether f is a character device (a terminal or
// /dev/null): what brev treats as "not piped".
func isCharDevice(f *os.File) bool {
	st, err := f.Stat()
	if err != nil {
		return true // no stdin at all: nothing to read
	}
	return st.Mode()&os.ModeCharDevice != 0
}

// stdinLines reads all of stdin, as brev does when it is not a char device
// (to EOF: an inherited pipe that is never closed hangs it), and returns
// its trimmed non-blank lines.
func (a *app) stdinLines() ([]string, error) {
	if !a.stdinPiped {
		return nil, nil
	}
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		return nil, fmt.Errorf("reading stdin: %w", err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// names returns the instance names of a command: its arguments and then
// stdin's lines.
func (a *app) names(args []string) ([]string, error) {
	extra, err := a.stdinLines()
	if err != nil {
		return nil, err
	}
	names := append(append([]string{}, args...), extra...)
	a.call.Names = names
	return names, nil
}

var errNameRequired = errors.New("instance name required: provide as argument or pipe from another command")

// multiError renders errs the way hashicorp/go-multierror does.
func multiError(errs []error) error {
	if len(errs) == 1 {
		return fmt.Errorf("1 error occurred:\n\t* %s\n", errs[0])
	}
	points := make([]string, len(errs))
	for n, err := range errs {
		points[n] = "* " + err.Error()
	}
	return fmt.Errorf("%d errors occurred:\n\t%s\n", len(errs), strings.Join(points, "\n\t"))
}

// stackError renders msg behind pkg/errors "stack" lines, as brev prints
// wrapped errors: "[error] \n<func>\n<file>:<line>\n: ...".
func stackError(msg string, frames ...string) error {
	var b strings.Builder
	for _, fr := range frames {
		pkg, fn, _ := strings.Cut(fr, ".")
		file := pkg[strings.LastIndex(pkg, "/")+1:]
		line := 30
		for _, c := range fr {
			line = (line*31 + int(c)) % 400
		}
		fmt.Fprintf(&b, "[error] \ngithub.com/brevdev/brev-cli/pkg/%s.%s\n/home/runner/work/brev-cli/brev-cli/pkg/%s/%s.go:%d\n: ",
			pkg, fn, pkg, file, 30+line)
	}
	b.WriteString(msg)
	return errors.New(b.String())
}

// notFound is brev's error for a name that matches no instance.
func notFound(name string, frames ...string) error {
	return stackError(fmt.Sprintf("instance with id/name %s not found", name), frames...)
}

// spin writes a few spinner frames the way briandowns/spinner v1.16 does:
// "\r<frame> <suffix>" with no newline, to stderr even when it is not a
// terminal, then erases the line.
func (a *app) spin(suffix string) {
	for _, frame := range []string{"⣾", "⣽", "⣻"} {
		fmt.Fprintf(a.stderr, "\r%s %s", frame, suffix)
	}
	fmt.Fprint(a.stderr, "\r\033[K")
}
