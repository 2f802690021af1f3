package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

func newLogsCmd(sio stdio, g *globals) *cobra.Command {
	var follow, asJSON bool
	cmd := &cobra.Command{
		Use:   "logs RUN [NODE]",
		Short: "Print the captured output of a run's nodes",
		Long: `Logs prints what a node printed (for jobs, the job's own output, streamed
while it ran: a wait node's log holds the output of the jobs it waits for).

NODE is a node id ('wait[lr=0.01]'), a step id (all its nodes), a cell id
(all the nodes of that cell, e.g. lr-0.01), or a prefix of one node id.
Without NODE it prints every node's log. Where several nodes are shown,
each line is prefixed with its node. -f follows the log until the nodes
(or the whole run) end. RUN is an id, a unique prefix of one, or "latest".

--json prints one JSON object per line: {"node", "step", "cell", "text"}
(docs/json.md).`,
		Example: `  taoflow logs latest
  taoflow logs latest train
  taoflow logs latest 'wait[lr=0.01,batch=16]' -f
  taoflow logs latest lr-0.01_batch-16 --json`,
		Args:              argsRange(1, 2),
		ValidArgsFunction: runCompletion(g, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			run, err := findRun(ctx, g.stateDir, args[0])
			if err != nil {
				return err
			}
			store, err := state.OpenReadOnly(g.stateDir)
			if err != nil {
				return err
			}
			defer store.Close()
			all, err := store.Nodes(ctx, run.ID)
			if err != nil {
				return err
			}
			nodes, many := all, true
			if len(args) == 2 {
				if nodes, many, err = runner.SelectNodes(run.ID, all, args[1]); err != nil {
					return err
				}
			}
			lp := &logPrinter{w: escapeWriter{sio.out}, many: many, nodes: map[string]state.Node{}}
			if asJSON {
				lp.w, lp.enc = sio.out, json.NewEncoder(sio.out)
			}
			var ids []string
			for _, n := range nodes {
				ids = append(ids, n.ID)
				lp.nodes[n.ID] = n
			}
			return lp.print(ctx, store, run.ID, ids, follow)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new output until the node or run ends")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per line")
	return cmd
}

// logLine is one line of a node's log as logs --json prints it. The logs
// keep no time or stream per line: a job's stdout and stderr arrive merged.
type logLine struct {
	Node string `json:"node"`
	Step string `json:"step"`
	Cell string `json:"cell,omitempty"`
	Text string `json:"text"`
}

// logPrinter prints log lines: plain (prefixed with the node when many
// nodes are shown) or as JSON.
type logPrinter struct {
	w     io.Writer
	enc   *json.Encoder
	many  bool
	nodes map[string]state.Node
	// sink, when set, takes each line instead (taoflow attach).
	sink func(node, text string)
}

func (p *logPrinter) line(node, text string) error {
	if p.sink != nil {
		p.sink(node, strings.TrimRight(text, "\r\n"))
		return nil
	}
	if p.enc != nil {
		n := p.nodes[node]
		return p.enc.Encode(logLine{Node: node, Step: n.Step, Cell: n.Cell, Text: strings.TrimRight(text, "\r\n")})
	}
	if p.many {
		text = node + " | " + text
	}
	_, err := io.WriteString(p.w, text)
	return err
}

// print prints the nodes' logs; with follow it polls for more until every
// node has ended.
func (p *logPrinter) print(ctx context.Context, store *state.Store, run string, nodes []string, follow bool) error {
	offsets := map[string]int64{}
	partial := map[string]string{}
	for {
		ended := true
		for _, id := range nodes {
			n, err := store.Node(ctx, run, id)
			if err == nil && !engine.NodeState(n.State).Terminal() {
				ended = false
			}
			if err := p.copyNew(store, run, id, offsets, partial); err != nil {
				return err
			}
		}
		if !follow || ended {
			if !follow {
				return nil
			}
			// One last read: the node may have logged between the two checks.
			for _, id := range nodes {
				if err := p.copyNew(store, run, id, offsets, partial); err != nil {
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

func (p *logPrinter) copyNew(store *state.Store, run, node string, offsets map[string]int64, partial map[string]string) error {
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
		if err := p.line(node, line); err != nil {
			return err
		}
	}
}
