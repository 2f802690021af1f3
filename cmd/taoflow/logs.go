package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

func newLogsCmd(sio stdio, g *globals) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs RUN [NODE]",
		Short: "Print the captured output of a run's nodes",
		Long: `Logs prints what a node printed (for jobs, the job's own output, streamed
while it ran). Without NODE it prints every node's log, each line prefixed
with the node. -f follows the log until the node (or the whole run) ends.
RUN is an id, a unique prefix of one, or "latest".`,
		Example: `  taoflow logs latest
  taoflow logs latest 'train[lr=0.01,batch=16]' -f`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: runCompletion(g, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			store, err := state.OpenReadOnly(g.stateDir)
			if err != nil {
				return usageError(err)
			}
			defer store.Close()
			run, err := runner.FindRun(ctx, store, args[0])
			if err != nil {
				return usageError(err)
			}
			nodes := []string{}
			if len(args) == 2 {
				if _, err := store.Node(ctx, run.ID, args[1]); err != nil {
					return usageError(fmt.Errorf("run %s has no node %q (taoflow status %s lists them)", run.ID, args[1], run.ID))
				}
				nodes = append(nodes, args[1])
			} else {
				all, err := store.Nodes(ctx, run.ID)
				if err != nil {
					return err
				}
				for _, n := range all {
					nodes = append(nodes, n.ID)
				}
			}
			return printLogs(ctx, escapeWriter{sio.out}, store, run.ID, nodes, len(args) == 1, follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the node or run ends")
	return cmd
}

// printLogs prints the nodes' logs; with follow it polls for more until
// every node has ended.
func printLogs(ctx context.Context, w io.Writer, store *state.Store, run string, nodes []string, prefix, follow bool) error {
	offsets := map[string]int64{}
	partial := map[string]string{}
	for {
		ended := true
		for _, id := range nodes {
			n, err := store.Node(ctx, run, id)
			if err == nil && (n.State == state.NodePending || n.State == state.NodeRunning) {
				ended = false
			}
			if err := copyNew(w, store, run, id, offsets, partial, prefix); err != nil {
				return err
			}
		}
		if !follow || ended {
			if !follow {
				return nil
			}
			// One last read: the node may have logged between the two checks.
			for _, id := range nodes {
				if err := copyNew(w, store, run, id, offsets, partial, prefix); err != nil {
					return err
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func copyNew(w io.Writer, store *state.Store, run, node string, offsets map[string]int64, partial map[string]string, prefix bool) error {
	rc, err := store.OpenLog(run, node)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, state.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	if s, ok := rc.(io.Seeker); ok {
		if _, err := s.Seek(offsets[node], io.SeekStart); err != nil {
			return err
		}
	} else if _, err := io.CopyN(io.Discard, rc, offsets[node]); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	r := bufio.NewReader(rc)
	for {
		line, err := r.ReadString('\n')
		offsets[node] += int64(len(line))
		if err != nil {
			partial[node] += line // an unfinished line: printed when it ends
			return nil
		}
		line = partial[node] + line
		partial[node] = ""
		if prefix {
			line = node + " | " + line
		}
		if _, err := io.WriteString(w, line); err != nil {
			return err
		}
	}
}
