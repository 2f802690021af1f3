package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/state"
)

func TestSelectNodes(t *testing.T) {
	nodes := []state.Node{
		{ID: "pre@a", Step: "pre", Instance: "a"},
		{ID: "train[n=1]", Step: "train", Cell: "n-1"},
		{ID: "train[n=2]", Step: "train", Cell: "n-2"},
		{ID: "wait[n=1]", Step: "wait", Cell: "n-1"},
		{ID: "wait[n=2]", Step: "wait", Cell: "n-2"},
	}
	tests := map[string]struct {
		x       string
		want    []string
		many    bool
		wantErr string
	}{
		"node":          {x: "wait[n=2]", want: []string{"wait[n=2]"}},
		"step":          {x: "train", want: []string{"train[n=1]", "train[n=2]"}, many: true},
		"cell":          {x: "n-1", want: []string{"train[n=1]", "wait[n=1]"}, many: true},
		"unique prefix": {x: "pre", want: []string{"pre@a"}, many: true}, // the step pre, whose one node it is
		"node prefix":   {x: "wait[n=1", want: []string{"wait[n=1]"}},
		"ambiguous":     {x: "wait[", wantErr: `"wait[" matches several nodes of run r: wait[n=1], wait[n=2]`},
		"misspelt":      {x: "wiat", wantErr: `run r has no node, step or cell "wiat" (did you mean "wait"?)`},
		"unknown":       {x: "zzzzzzzz", wantErr: `run r has no node, step or cell "zzzzzzzz"; taoflow status r lists its nodes`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			sel, many, err := SelectNodes("r", nodes, tt.x)
			if tt.wantErr != "" {
				var refusedErr *RefusedError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &refusedErr) {
					t.Fatalf("error = %v, want a refusal containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range sel {
				got = append(got, n.ID)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" || many != tt.many {
				t.Errorf("SelectNodes(%q) many=%v (-want +got):\n%s", tt.x, many, diff)
			}
		})
	}
}

func TestCheckVars(t *testing.T) {
	r := &Resumed{Run: state.Run{ID: "r1", Vars: map[string]string{"lr": "0.1", "dir": "/x"}}}
	tests := map[string]struct {
		flags   map[string]string
		wantErr string
	}{
		"none":      {},
		"same":      {flags: map[string]string{"lr": "0.1", "dir": "/x"}},
		"differing": {flags: map[string]string{"lr": "0.2"}, wantErr: `--var lr="0.2" differs from the value run r1 started with (lr="0.1")`},
		"unknown":   {flags: map[string]string{"epochs": "3"}, wantErr: "--var epochs: run r1 has no var epochs"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			err := r.CheckVars(tt.flags)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
