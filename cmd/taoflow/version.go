package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// versionInfo is what `taoflow version --json` prints.
type versionInfo struct {
	Version    string `json:"version"`
	Revision   string `json:"revision,omitempty"` // the VCS commit it was built from
	PlanFormat int    `json:"plan_format"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: version, PlanFormat: 1, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v.Revision = s.Value[:12]
			}
		}
	}
	return v
}

// versionLine is the version as one line, for `taoflow version` and
// `taoflow --version`.
func versionLine() string {
	v := currentVersion()
	rev := ""
	if v.Revision != "" {
		rev = " " + v.Revision
	}
	return fmt.Sprintf("taoflow %s%s (plan format %d, %s %s/%s)", v.Version, rev, v.PlanFormat, v.Go, v.OS, v.Arch)
}

func newVersionCmd(sio stdio) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the taoflow version",
		Args:  argsRange(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				return writeJSON(sio.out, currentVersion())
			}
			fmt.Fprintln(sio.out, versionLine())
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
