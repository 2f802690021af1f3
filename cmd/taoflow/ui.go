package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/runner"
	"github.com/taoflow/taoflow/state"
	"github.com/taoflow/taoflow/web"
)

func newUICmd(sio stdio, g *globals) *cobra.Command {
	var addr string
	var poll time.Duration
	var confirmed runner.Confirmed
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a local web page of the runs, live (127.0.0.1 only, with a token)",
		Long: `UI serves a web page of the runs on this machine, as jupyter does: it listens
on --addr (default 127.0.0.1:8765; port 0 picks a free one) and prints, on
its first line, the URL to open, which carries a random access token:

  http://127.0.0.1:8765/?token=…

Every request without the token is refused (401), the page's assets and
its event stream included; after the first visit a cookie (HttpOnly,
SameSite=Strict) carries it and the token leaves the address bar. It
listens on a loopback address only: another address is exit 2.

Pages: the runs (of this state and of every state in the index of states
that 'status --all' reads; filter by tag, check two or more to compare
them), a run (one row per cell with its matrix values, step, instance,
epoch and latest metrics; the node graph; the instances with uptime, cost
and GPU-idle time; what failed with its log's last lines; the results table,
sortable, with where each cell's results are), a node's log (followed
live), and a comparison of runs. Pages update themselves while a run goes
(Server-Sent Events); they work on a phone's screen.

It reads the state, as status does, and changes nothing but for one
button: "cancel this run", which does what 'taoflow cancel RUN' does. Every
asset is in the taoflow binary: the pages load nothing from elsewhere
(their Content-Security-Policy forbids it). Charts are drawn on the server
as SVG. Ctrl-C stops the server.`,
		Example: `  taoflow ui
  taoflow ui --addr 127.0.0.1:0        # any free port
  ssh -L 8765:127.0.0.1:8765 box taoflow ui   # from another machine, through ssh`,
		Args: argsRange(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return usageError(fmt.Errorf("--addr %q: want HOST:PORT, e.g. 127.0.0.1:8765", addr))
			}
			if !web.Loopback(host) {
				return usageError(fmt.Errorf("--addr %q: taoflow ui listens on a loopback address only (127.0.0.1, ::1 or localhost): the state it shows names hosts, paths and commands; from another machine, forward the port through ssh (ssh -L 8765:127.0.0.1:8765 HOST)", addr))
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("taoflow ui: %w", err)
			}
			port := ln.Addr().(*net.TCPAddr).Port
			token := web.NewToken()
			h := web.New(web.Config{
				Dirs: func() []string {
					dirs, _ := allStates(g)
					return dirs
				},
				Cancel: func(ctx context.Context, dir, id string) (string, error) {
					return uiCancel(ctx, g, dir, id, confirmed)
				},
				Poll: poll,
			})
			defer h.Close()
			srv := &http.Server{Handler: web.Guard(token, port, h), ReadHeaderTimeout: 10 * time.Second}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			urlHost := host
			if strings.Contains(urlHost, ":") {
				urlHost = "[" + urlHost + "]"
			}
			fmt.Fprintf(sio.out, "http://%s/?token=%s\n", net.JoinHostPort(strings.Trim(urlHost, "[]"), strconv.Itoa(port)), token)
			fmt.Fprintf(escapeWriter{sio.err}, "taoflow ui: serving the runs of %s and of the index of states; Ctrl-C stops it\n", g.stateDir)
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err := <-done:
				return err
			case <-ctx.Done():
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			// Event streams never end by themselves: close what is left.
			if err := srv.Shutdown(sctx); err != nil {
				_ = srv.Close()
			}
			if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8765", "`HOST:PORT` to listen on, a loopback address only (port 0: any free one)")
	cmd.Flags().DurationVar(&poll, "poll", time.Second, "how often live pages look for changes in the state")
	_ = cmd.Flags().MarkHidden("poll")
	confirmFlags(cmd, &confirmed)
	return cmd
}

// uiCancel is the UI's cancel of run id in the state dir: cancelRun, its
// output kept for the page.
func uiCancel(ctx context.Context, g *globals, dir, id string, confirmed runner.Confirmed) (string, error) {
	store, err := state.Open(dir)
	if err != nil {
		return "", err
	}
	defer store.Close()
	r, err := store.Run(ctx, id)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	gd := *g
	gd.stateDir = dir
	sio := stdio{in: strings.NewReader(""), out: &out, err: &out}
	interrupted, err := cancelRun(ctx, sio, &gd, store, r, confirmed)
	if interrupted {
		fmt.Fprintf(&out, "interrupted its apply (pid %d): it stops the running nodes, runs the finalizers and tears down; this page follows it\n", r.PID)
	}
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) && ee.err == nil {
			err = fmt.Errorf("exit %d", ee.code) // what it said is in out
		}
	}
	return out.String(), err
}
