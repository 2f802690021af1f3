package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/taoflow/taoflow/internal/provenance"
	"github.com/taoflow/taoflow/plan"
	"github.com/taoflow/taoflow/secret"
	"github.com/taoflow/taoflow/state"
)

// Summary is what notifiers receive: how the run ended, as JSON.
type Summary struct {
	RunID      string            `json:"run_id"`
	RunName    string            `json:"run_name,omitempty"`
	Plan       string            `json:"plan"`
	PlanFile   string            `json:"plan_file"`
	State      string            `json:"state"`
	ExitCode   int               `json:"exit_code"`
	Message    string            `json:"message"`
	StartedAt  time.Time         `json:"started_at"`
	EndedAt    time.Time         `json:"ended_at"`
	Tags       map[string]string `json:"tags,omitempty"`
	Provenance json.RawMessage   `json:"provenance,omitempty"`
	// Left are the resources that may still exist (teardown incomplete).
	Left    []string    `json:"left,omitempty"`
	Results ResultTable `json:"results"`
}

// NotifyOutcome is how one notifier went.
type NotifyOutcome struct {
	What string // "notify command" or "notify webhook"
	Err  error  // nil when it succeeded
}

// Notify tells the plan's notifiers how the run ended, when notify.on asks
// for it. It runs after teardown, each notifier bounded by notify.timeout,
// and its outcome never changes the run's: the caller reports failures.
// Errors carry no secret: the webhook's URL is never in them, and every
// message passes through the run's redactor.
func (a *Apply) Notify(ctx context.Context, o Outcome) []NotifyOutcome {
	n := a.cfg.Plan.Notify
	if n == nil || !n.Wants(o.State == state.RunSucceeded) {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	body, err := a.summary(ctx, o)
	if err != nil {
		return []NotifyOutcome{{What: "notify", Err: err}}
	}
	red := a.cfg.Secrets.Redactor()
	body = red.RedactBytes(body)
	var out []NotifyOutcome
	if n.Command != "" {
		env := notifyEnv(os.Environ(), a.cfg.Plan, a.cfg.Secrets)
		err := notifyCommand(ctx, n, filepath.Dir(a.cfg.Plan.File), env, body, red)
		out = append(out, NotifyOutcome{What: "notify command", Err: redactErr(red.Redact, err)})
	}
	if n.WebhookURL != "" || n.WebhookSecret.Name != "" {
		target := n.WebhookURL
		if s := n.WebhookSecret.Name; s != "" {
			target, _ = a.cfg.Secrets.Value(s)
		}
		err := notifyWebhook(ctx, n, target, body)
		out = append(out, NotifyOutcome{What: "notify webhook", Err: redactErr(red.Redact, err)})
	}
	return out
}

func redactErr(redact func(string) string, err error) error {
	if err == nil {
		return nil
	}
	return errors.New(redact(err.Error()))
}

func (a *Apply) summary(ctx context.Context, o Outcome) ([]byte, error) {
	r, err := a.store.Run(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	rec, err := a.store.RunRecord(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	t, err := Results(ctx, a.store, a.ID)
	if err != nil {
		return nil, err
	}
	s := Summary{RunID: a.ID, RunName: rec.Label, Plan: a.cfg.Plan.Name, PlanFile: r.PlanFile, State: o.State, ExitCode: o.ExitCode,
		Message: o.Message, StartedAt: r.StartedAt, EndedAt: r.EndedAt, Tags: rec.Tags, Left: o.Left, Results: t}
	// The provenance as the plan's provenance: asks for it (the state
	// keeps it whole).
	if len(rec.Provenance) > 0 {
		var info provenance.Info
		if err := json.Unmarshal(rec.Provenance, &info); err == nil {
			shared := info.Shared(a.cfg.Plan.Provenance)
			s.Provenance, _ = json.Marshal(shared)
			if shared.Level == provenance.LevelMinimal && filepath.IsAbs(s.PlanFile) {
				s.PlanFile = shared.PlanPath
			}
		}
	}
	return json.MarshalIndent(s, "", "  ")
}

// notifyClip is how much of the last line a failed notify command printed
// its error keeps.
const notifyClip = 200

// notifyEnv is env less the plan's secrets, but for those notify.env
// names: a variable a secret is read from, and any other whose value holds
// a secret (the same key exported twice), is left out.
func notifyEnv(env []string, p *plan.Plan, secrets *secret.Set) []string {
	keep := map[string]bool{}
	if p.Notify != nil {
		for _, n := range p.Notify.Env {
			keep[n.Name] = true
		}
	}
	var drop []string
	for _, n := range p.SecretNames() {
		if !keep[n] {
			drop = append(drop, n)
		}
	}
	var others []string
	for _, n := range secrets.Names() {
		if !keep[n] {
			v, _ := secrets.Value(n)
			others = append(others, v)
		}
	}
	red := secret.NewRedactor(others...)
	out := make([]string, 0, len(env))
	for _, kv := range environWithout(env, drop) {
		k, v, _ := strings.Cut(kv, "=")
		if keep[k] || red.Redact(v) == v {
			out = append(out, kv)
		}
	}
	return out
}

// notifyCommand runs the command with sh -c in dir, with environment env
// and the summary on stdin. At the timeout its process group is killed.
// Its error quotes the last line the command printed, redacted by red
// before it is clipped.
func notifyCommand(ctx context.Context, n *plan.Notify, dir string, env []string, body []byte, red *secret.Redactor) error {
	ctx, cancel := context.WithTimeout(ctx, n.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", n.Command)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(body)
	var outb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &outb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	cmd.Env = env
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("did not finish within %s (killed)", n.Timeout)
	}
	if err != nil {
		last := strings.TrimSpace(outb.String())
		if i := strings.LastIndexByte(last, '\n'); i >= 0 {
			last = last[i+1:]
		}
		last = red.Clip(last, notifyClip)
		if last != "" {
			return fmt.Errorf("%w: %s", err, last)
		}
		return err
	}
	return nil
}

// notifyWebhook POSTs the summary to target. Its errors never hold the
// URL, which may carry a token.
func notifyWebhook(ctx context.Context, n *plan.Notify, target string, body []byte) error {
	if target == "" {
		return errors.New("its URL is empty")
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("its URL is not an http(s) URL")
	}
	ctx, cancel := context.WithTimeout(ctx, n.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return errors.New("its URL is not usable")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "taoflow")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("POST to %s did not answer within %s", u.Host, n.Timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("POST to %s failed: %w", u.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST to %s answered %s", u.Host, resp.Status)
	}
	return nil
}
