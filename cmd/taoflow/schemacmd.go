package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/examples"
	"github.com/taoflow/taoflow/schema"
)

func newSchemaCmd(sio stdio) *cobra.Command {
	var reference bool
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema that plans are validated with",
		Long: `Schema prints the JSON Schema (draft 2020-12) of the plan format, exactly
the one embedded in this binary and used by validate, plan and apply. Every
key a plan may hold is in it, with its type, default and description.

Point an editor at it for completion and hovers, e.g. with the YAML
language server, by saving it and starting a plan with

  # yaml-language-server: $schema=./taoflow.schema.json

--reference prints the same schema as the Markdown reference of the README
and docs/plan-reference.md instead.`,
		Example: `  taoflow schema > taoflow.schema.json
  taoflow schema | jq '.["$defs"]["with-run"].properties | keys'
  taoflow schema --reference | less`,
		Args: argsRange(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reference {
				_, err := fmt.Fprint(sio.out, schema.Reference())
				return err
			}
			_, err := sio.out.Write(schema.JSON)
			return err
		},
	}
	cmd.Flags().BoolVar(&reference, "reference", false, "print the Markdown reference generated from the schema")
	return cmd
}

func newInitCmd(sio stdio) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "init [FILE]",
		Short: "Write a commented starter plan (default plan.yaml)",
		Long: `Init writes a commented starter plan to FILE (default plan.yaml; - for
standard output): send the plan's directory to an instance, train a 2-cell
sweep there, follow the jobs, fetch the results back beside the plan, and
tear down. It validates and runs as written on this machine (the local
platform, no account needed); its comments say what to change for an ssh
host or a Brev GPU. docs/first-plan.md walks through it.

An existing FILE is left as it is (exit 2) unless --force is given; then it
is replaced as a whole (a symlink at FILE is replaced, never written
through).`,
		Example: `  taoflow init
  taoflow init sweep.yaml && taoflow plan sweep.yaml
  taoflow init - | less`,
		Args:              argsRange(0, 1),
		ValidArgsFunction: planFileCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "plan.yaml"
			if len(args) == 1 {
				file = args[0]
			}
			if file == "-" {
				_, err := sio.out.Write(examples.FirstPlan)
				return err
			}
			if err := writeStarter(file, force); err != nil {
				return err
			}
			fmt.Fprintf(sio.out, "wrote %s: a 2-cell sweep on this machine (send, run, wait, fetch, delete)\nnext:\n  taoflow plan %s     # what it will do, touching nothing\n  taoflow apply %s    # run it; results land in results/ beside it\n", file, file, file)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE when it exists")
	return cmd
}

// writeStarter writes the starter plan to file: created exclusively (an
// existing file, or a symlink, is a usage error naming --force), or, with
// force, written beside it and renamed over it.
func writeStarter(file string, force bool) error {
	if !force {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			return usageError(fmt.Errorf("%s exists; init leaves it as it is (replace it with: taoflow init --force %s, or name another file)", file, file))
		}
		if err != nil {
			return err
		}
		if _, err := f.Write(examples.FirstPlan); err != nil {
			f.Close()
			os.Remove(file)
			return err
		}
		return f.Close()
	}
	if fi, err := os.Lstat(file); err == nil && fi.IsDir() {
		return usageError(fmt.Errorf("%s is a directory; name a file", file))
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(examples.FirstPlan); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}
