package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/engine"
	"github.com/taoflow/taoflow/pricing"
	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
)

// attachPoll is how often attach reads the state for what is new.
const attachPoll = 250 * time.Millisecond

func newAttachCmd(sio stdio, g *globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "attach RUN",
		Short: "Watch a running run (one started with apply --detach, say) until it ends",
		Long: `Attach shows RUN as apply shows it, read from the state while the run's
apply writes it: on a terminal the live table of its nodes, otherwise (or
with --output plain) timestamped lines, the events so far first. RUN is an
id, a name, a unique prefix of an id, or "latest".

Ctrl-C detaches this view only: the run goes on (attach exits 130);
'taoflow cancel RUN' stops it. When the run ends, attach prints how it
ended and exits with the run's exit code (0, 1, 3 or 130 as apply would);
a run that had ended already is said at once, with its code. A run whose
apply died without ending it: attach says so, with the commands that go on
from there (exit 1).`,
		Example: `  taoflow apply sweep.yaml --detach --yes
  taoflow attach latest
  taoflow attach sweep-1203 --output plain | tee watch.log`,
		Args:              argsRange(1, 1),
		ValidArgsFunction: runCompletion(g, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "auto", "plain":
			default:
				return usageError(fmt.Errorf("--output %q: use auto or plain", output))
			}
			return attach(cmd.Context(), sio, g, args[0], output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "auto", "output: `auto` (a live table on a terminal) or plain")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"auto", "plain"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// attach follows run id in the state until it ends or the user presses
// Ctrl-C.
func attach(ctx context.Context, sio stdio, g *globals, id, output string) error {
	r, err := findRun(ctx, g.stateDir, id)
	if err != nil {
		return err
	}
	store, err := state.OpenReadOnly(g.stateDir)
	if err != nil {
		return err
	}
	defer store.Close()
	errw := escapeWriter{sio.err}
	if done, err := attachEnded(sio, store, r); done {
		return err
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	// The run records its nodes as it starts: a run just started by
	// apply --detach may have none yet.
	var nodes []state.Node
	for {
		if nodes, err = store.Nodes(ctx, r.ID); err != nil {
			return err
		}
		if len(nodes) > 0 {
			break
		}
		if r, err = store.Run(ctx, r.ID); err != nil {
			return err
		}
		if done, err := attachEnded(sio, store, r); done {
			return err
		}
		select {
		case <-sigs:
			return attachDetached(sio, r)
		case <-time.After(attachPoll):
		}
	}
	graph := &engine.Graph{RunID: r.ID}
	instance := map[string]string{}
	for _, n := range nodes {
		graph.Nodes = append(graph.Nodes, &engine.Node{ID: n.ID, Instance: n.Instance})
		instance[n.ID] = n.Instance
	}
	view := newView(output, sio.out, sio.err, sio.out, r.ID, graph, func() (pricing.RunCost, error) {
		return pricing.Costs(ctx, store, r.ID, time.Now())
	})
	if hv, ok := view.(*humanView); ok {
		if lv, ok := hv.Observer.(*liveView); ok {
			lv.started = r.StartedAt // its elapsed time is the run's
		}
	}
	fmt.Fprintf(errw, "taoflow: attached to run %s (its apply: pid %d). Ctrl-C detaches this view only: the run goes on ('taoflow cancel %s' stops it)\n", r.ID, r.PID, r.ID)

	f := &attachFeed{store: store, run: r.ID, view: view, instance: instance, active: map[string]bool{},
		offsets: map[string]int64{}, partial: map[string]string{}}
	for _, n := range nodes {
		f.ids = append(f.ids, n.ID)
		if engine.NodeState(n.State) == engine.Running {
			f.active[n.ID] = true
		}
	}
	f.lp.sink = f.logLine
	// What the nodes logged before: its last line each, not all of it
	// ('taoflow logs RUN' has that).
	if err := f.events(ctx); err != nil {
		view.Close()
		return err
	}
	f.catchUp()
	for {
		if err := f.events(ctx); err != nil {
			view.Close()
			return err
		}
		f.logs()
		if r, err = store.Run(ctx, r.ID); err != nil {
			view.Close()
			return err
		}
		if r.State != state.RunRunning || runner.ApplyGone(r) {
			// What it recorded last, then how it ended.
			if err := f.events(ctx); err != nil {
				view.Close()
				return err
			}
			f.logs()
			view.Close()
			_, err := attachEnded(sio, store, r)
			return err
		}
		select {
		case <-sigs:
			view.Close()
			return attachDetached(sio, r)
		case <-time.After(attachPoll):
		}
	}
}

// attachDetached is attach's Ctrl-C: the view goes, the run does not.
func attachDetached(sio stdio, r state.Run) error {
	fmt.Fprintf(escapeWriter{sio.err}, "\ntaoflow: detached from run %s; it goes on: 'taoflow attach %s' watches it again, 'taoflow cancel %s' stops it\n", r.ID, r.ID, r.ID)
	return silent(exitInterrupted)
}

// attachEnded says how run r ended, when it has (or when its apply died
// without ending it), and gives the error attach exits with.
func attachEnded(sio stdio, store *state.Store, r state.Run) (bool, error) {
	w := escapeWriter{sio.err}
	if runner.ApplyGone(r) {
		alive, err := store.Alive(context.Background(), r.ID)
		if err != nil {
			return true, err
		}
		next := runner.NextSteps(r, alive)
		fmt.Fprintf(w, "taoflow: run %s is not running: its apply (pid %d) died without ending it\ncontinue it:     %s\nor tear it down: %s\n", r.ID, r.PID, next[0], next[1])
		return true, silent(exitFailed)
	}
	if r.State == state.RunRunning {
		return false, nil
	}
	fmt.Fprintf(w, "taoflow: run %s %s (exit %d)\n", r.ID, r.Message, r.ExitCode)
	if r.ExitCode == exitOK {
		return true, nil
	}
	return true, silent(r.ExitCode)
}

// attachFeed turns what the state records of a run (its events, its
// nodes' logs) back into the engine events the views show.
type attachFeed struct {
	store    *state.Store
	run      string
	view     applyView
	instance map[string]string // node → its instance, as recorded at the start
	seq      int64
	ids      []string
	// active are the nodes whose logs are read: running, or ended since
	// the last read.
	active  map[string]bool
	ended   []string
	lp      logPrinter
	offsets map[string]int64
	partial map[string]string
	last    map[string]string // catchUp: each node's last line
}

// events shows the events recorded since the last call.
func (f *attachFeed) events(ctx context.Context) error {
	evs, err := f.store.Events(ctx, f.run, f.seq, 1000)
	if err != nil {
		return err
	}
	for _, e := range evs {
		f.seq = e.Seq
		if e.Node != "" {
			if _, ok := f.instance[e.Node]; !ok {
				continue // a node attach does not know: no row to show it in
			}
		}
		ev := engineEvent(e, f.instance)
		switch ev.Type {
		case engine.NodeStarted:
			f.active[ev.Node] = true
		case engine.NodeEnded:
			f.ended = append(f.ended, ev.Node)
		default:
		}
		f.view.Event(ev)
	}
	if len(evs) == 1000 {
		return f.events(ctx)
	}
	return nil
}

// engineEvent is a recorded event as the engine emitted it (less what
// the state does not keep: progress figures).
func engineEvent(e state.Event, instance map[string]string) engine.Event {
	ev := engine.Event{Time: e.Time, Type: engine.EventType(e.Type), Node: e.Node, Message: e.Message,
		State: engine.NodeState(e.Data["state"]), Instance: e.Data["instance"]}
	if ev.Instance == "" && e.Node != "" {
		ev.Instance = instance[e.Node]
	}
	if a, err := strconv.Atoi(e.Data["attempt"]); err == nil {
		ev.Attempt = a
	}
	if c, err := strconv.Atoi(e.Data["exit_code"]); err == nil {
		ev.ExitCode = &c
	}
	return ev
}

// catchUp reads the nodes' logs so far and shows each one's last line.
func (f *attachFeed) catchUp() {
	f.last = map[string]string{}
	for _, id := range f.ids {
		_ = f.lp.copyNew(f.store, f.run, id, f.offsets, f.partial)
	}
	for _, id := range f.ids {
		if l, ok := f.last[id]; ok {
			f.view.Event(engine.Event{Time: time.Now(), Type: engine.NodeLog, Node: id, Instance: f.instance[id], Message: l})
		}
	}
	f.last = nil
}

// logs shows the lines the active nodes logged since the last call; a
// node that ended is read once more, then no longer.
func (f *attachFeed) logs() {
	for _, id := range f.ids {
		if f.active[id] {
			_ = f.lp.copyNew(f.store, f.run, id, f.offsets, f.partial)
		}
	}
	for _, id := range f.ended {
		delete(f.active, id)
	}
	f.ended = f.ended[:0]
}

func (f *attachFeed) logLine(node, text string) {
	if f.last != nil {
		f.last[node] = text
		return
	}
	f.view.Event(engine.Event{Time: time.Now(), Type: engine.NodeLog, Node: node, Instance: f.instance[node], Message: text})
}
