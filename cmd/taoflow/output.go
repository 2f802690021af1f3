package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// One convention for machine-readable output: every command that prints
// data has --json; -o/--output json means the same. apply, whose --output
// also picks a human view (auto, plain), takes --json as --output json.
// docs/json.md describes what each prints.

// addOutputFlags gives every command under root with a --json flag an
// -o/--output flag (text or json), and checks and applies it, or apply's
// --json, before the command runs.
func addOutputFlags(root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("json") != nil && c.Flags().Lookup("output") == nil {
			c.Flags().StringP("output", "o", "text", "output: `text` or json (-o json is --json)")
			_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		return resolveOutput(cmd)
	}
}

// resolveOutput makes --json and --output agree on cmd.
func resolveOutput(cmd *cobra.Command) error {
	js, out := cmd.Flags().Lookup("json"), cmd.Flags().Lookup("output")
	if js == nil || out == nil {
		return nil
	}
	if cmd.Name() == "apply" {
		if js.Changed && js.Value.String() == "true" {
			if out.Changed && out.Value.String() != "json" {
				return usageError(fmt.Errorf("--json and --output %s disagree", out.Value))
			}
			return out.Value.Set("json")
		}
		return nil
	}
	if !out.Changed {
		return nil
	}
	switch out.Value.String() {
	case "json":
		return js.Value.Set("true")
	case "text":
		if js.Changed && js.Value.String() == "true" {
			return usageError(fmt.Errorf("--json and --output text disagree"))
		}
		return nil
	}
	return usageError(fmt.Errorf("--output %q: use text or json", out.Value))
}
