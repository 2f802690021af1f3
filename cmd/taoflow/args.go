package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// argsRange checks that a command has from min to max arguments (max < 0:
// no upper bound) and says which one is missing or which are too many, in
// the words of its Use line, instead of cobra's "accepts 1 arg(s),
// received 0".
func argsRange(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < min:
			return usageError(fmt.Errorf("%s: missing %s (usage: %s)", cmd.Name(), argName(cmd, len(args)), usageLine(cmd)))
		case max >= 0 && len(args) > max:
			what := "takes no arguments"
			if max > 0 {
				what = fmt.Sprintf("takes at most %d argument%s", max, plural(max))
			}
			return usageError(fmt.Errorf("%s %s; unexpected: %s (usage: %s)", cmd.Name(), what, strings.Join(args[max:], " "), usageLine(cmd)))
		}
		return nil
	}
}

// argName is the name the Use line gives argument i: "RUN" for i=0 of
// "logs RUN [NODE]".
func argName(cmd *cobra.Command, i int) string {
	f := strings.Fields(cmd.Use)
	if i+1 < len(f) {
		return strings.Trim(f[i+1], "[].")
	}
	return "an argument"
}

func usageLine(cmd *cobra.Command) string {
	return strings.TrimSuffix(cmd.UseLine(), " [flags]")
}
