package plan

import (
	"time"
)

// Notify values of `on`.
const (
	NotifyEnd     = "end"     // the run succeeded
	NotifyFailure = "failure" // it failed, was interrupted or left something
	NotifyBoth    = "both"
)

// Tag is one `tags:` entry of the plan.
type Tag struct {
	Key   string
	Value string
	Pos   Pos
}

// Notify is the plan's `notify:`: who hears how a run ended.
type Notify struct {
	Pos     Pos
	On      string // NotifyEnd, NotifyFailure or NotifyBoth
	Command string
	// WebhookURL is a URL without credentials; WebhookSecret names the
	// declared secret that holds one. At most one is set.
	WebhookURL    string
	WebhookSecret Name
	// Env names the declared secrets the command gets in its environment;
	// it gets none of the plan's others.
	Env     []Name
	Timeout time.Duration
}

// Wants reports whether a run that ended succeeded (or not) is notified.
func (n *Notify) Wants(succeeded bool) bool {
	switch n.On {
	case NotifyEnd:
		return succeeded
	case NotifyFailure:
		return !succeeded
	}
	return true
}

// buildRecords reads the plan's tags: and notify:.
func buildRecords(p *Plan, root *Value) {
	if v := root.Get("tags"); v != nil {
		for _, f := range v.Fields {
			if f.Value.Kind == Scalar {
				p.Tags = append(p.Tags, Tag{Key: f.Key, Value: f.Value.Text, Pos: f.KeyPos})
			}
		}
	}
	f := root.Field("notify")
	if f == nil || f.Value.Kind != Map {
		return
	}
	v := f.Value
	n := &Notify{Pos: f.KeyPos, On: scalar(v.Get("on")), Command: scalar(v.Get("command")), Timeout: 30 * time.Second}
	if n.On == "" {
		n.On = NotifyBoth
	}
	if w := v.Get("webhook"); w != nil {
		n.WebhookURL = scalar(w.Get("url"))
		if s := w.Field("url_secret"); s != nil && s.Value.Kind == Scalar {
			n.WebhookSecret = Name{Name: s.Value.Text, Pos: s.Value.Pos}
		}
	}
	if e := v.Get("env"); e != nil && e.Kind == List {
		n.Env = names(e)
	}
	if d, err := time.ParseDuration(scalar(v.Get("timeout"))); err == nil && d > 0 {
		n.Timeout = d
	}
	p.Notify = n
}

// notifySecret checks that notify.webhook.url_secret and the names of
// notify.env are declared.
func (c *checker) notifySecret() {
	n := c.p.Notify
	if n == nil {
		return
	}
	if n.WebhookSecret.Name != "" && !c.declared(n.WebhookSecret.Name) {
		c.d.errorf(n.WebhookSecret.Pos, "secret %q is not declared: add it to secrets: at the top of the plan (its value then comes from taoflow's environment)", n.WebhookSecret.Name)
	}
	for _, e := range n.Env {
		if !c.declared(e.Name) {
			c.d.errorf(e.Pos, "notify.env names %q, which is not declared under secrets: add it there (its value then comes from taoflow's environment)", e.Name)
		}
	}
	if len(n.Env) > 0 && n.Command == "" {
		c.d.warnf(c.p.Notify.Pos, "notify.env only matters for notify.command, which this plan does not set")
	}
}
