package brev

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taoflow/taoflow/platform"
	"github.com/taoflow/taoflow/platform/brev/brevtest"
	"github.com/taoflow/taoflow/platform/ssh/sshtest"
)

// TestSearchFilters selects types of the fake's catalogue by each filter:
// those brev has go on its command line, the GPU count and the price cap
// are applied to its answer; the result is cheapest first, or in the
// order of Types.
func TestSearchFilters(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	b, _ := newBrev(t, f, Config{})
	for name, c := range map[string]struct {
		filter platform.Filter
		want   []string
		args   []string // of the brev search call
	}{
		"gpu substring": {platform.Filter{GPU: "a100"},
			[]string{"gpu_1x_a100_sxm4", "gpu_1x_a100_80gb_sxm4", "a2-ultragpu-1g", "p4d.24xlarge"},
			[]string{"search", "--json", "--sort", "price", "--gpu-name", "a100"}},
		"gpus": {platform.Filter{GPU: "H100", GPUs: 8}, []string{"gpu_8x_h100_sxm5", "p5.48xlarge"}, nil},
		"min_vram": {platform.Filter{GPU: "A100", MinVRAM: 80}, []string{"gpu_1x_a100_80gb_sxm4", "a2-ultragpu-1g"},
			[]string{"search", "--json", "--sort", "price", "--gpu-name", "A100", "--min-vram", "80"}},
		"max_price":  {platform.Filter{GPU: "A100", MinVRAM: 80, MaxPrice: 3}, []string{"gpu_1x_a100_80gb_sxm4"}, nil},
		"stoppable":  {platform.Filter{GPU: "A100", MinVRAM: 80, Stoppable: true}, []string{"a2-ultragpu-1g"}, nil},
		"provider":   {platform.Filter{GPU: "H100", Provider: "aws"}, []string{"p5.48xlarge"}, nil},
		"min_disk":   {platform.Filter{GPU: "H100", MinDisk: 3000}, []string{"gpu_8x_h100_sxm5", "p5.48xlarge"}, nil},
		"none":       {platform.Filter{GPU: "B200"}, nil, nil},
		"types kept": {platform.Filter{Types: []string{"g5.2xlarge", "g5.xlarge", "no-such"}}, []string{"g5.2xlarge", "g5.xlarge"}, nil},
		"types and price": {platform.Filter{Types: []string{"g5.2xlarge", "g5.xlarge"}, MaxPrice: 1.3},
			[]string{"g5.xlarge"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			before := len(f.CallsOf("search", ""))
			offers, err := b.Search(context.Background(), c.filter)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range offers {
				got = append(got, o.Type)
				if why := c.filter.Excludes(o); why != "" {
					t.Errorf("%s was selected, yet Excludes says %s", o.Type, why)
				}
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("types (-want +got):\n%s", diff)
			}
			calls := f.CallsOf("search", "")
			if len(calls) != before+1 {
				t.Fatalf("%d brev search calls, want 1", len(calls)-before)
			}
			if c.args != nil && !slices.Equal(calls[len(calls)-1].Args, c.args) {
				t.Errorf("brev %q, want %q", calls[len(calls)-1].Args, c.args)
			}
		})
	}
}

// TestFakeSearch holds the fake to brev search as the reference describes
// it: [] when nothing matches, an unknown sort is an error.
func TestFakeSearch(t *testing.T) {
	f := brevtest.Start(t, brevtest.Options{})
	b, _ := newBrev(t, f, Config{})
	bin, _ := lookPath(f.Binary, "")
	out, err := b.callWith(context.Background(), bin, "search", "--json", "--gpu-name", "B200")
	if err != nil || string(out) != "[]\n" {
		t.Errorf("search with no match printed %q (%v), want []", out, err)
	}
	_, err = b.callWith(context.Background(), bin, "search", "--json", "--sort", "cheapness")
	if !says(err, "invalid sort option") {
		t.Errorf("search --sort cheapness: %v, want an error naming the valid ones", err)
	}
	out, err = b.callWith(context.Background(), bin, "search", "--json", "--sort", "gpu-count", "--desc")
	if err != nil {
		t.Fatal(err)
	}
	offers, err := ParseSearch(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(offers) < 2 || offers[0].GPUs != 8 || offers[len(offers)-1].GPUs != 1 {
		t.Errorf("--sort gpu-count --desc: first %+v, last %+v", offers[0], offers[len(offers)-1])
	}
}

// TestCreateLearnsTypeAndPrice: the type chain's first entry has no
// capacity, so brev makes the second; Create reports that type (from ls
// --json), its price and that it cannot be stopped, and Stop refuses it
// without running brev stop.
func TestCreateLearnsTypeAndPrice(t *testing.T) {
	srv := sshtest.Start(t)
	f := brevtest.Start(t, brevtest.Options{SSH: srv})
	b, run := newBrev(t, f, Config{})
	ctx := context.Background()
	offers, err := b.Search(ctx, platform.Filter{GPU: "H100", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(offers) < 2 || offers[0].Type != "gpu_1x_h100_pcie" {
		t.Fatalf("offers %+v: want the out-of-capacity gpu_1x_h100_pcie first", offers)
	}
	chain := offers[0].Type + "," + offers[1].Type
	inst, err := b.Create(ctx, run, platform.Spec{Name: "gpu", Type: chain, Offers: offers})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Delete(ctx, inst); err != nil {
			t.Error(err)
		}
		f.CheckNoneAlive(t)
	}()
	want := map[string]string{"type": "gpu_1x_h100_sxm5", "price_per_hour": "3.29", "stoppable": "false", "gpu": "1x H100"}
	for k, v := range want {
		if inst.Attrs[k] != v {
			t.Errorf("Attrs[%s] = %q, want %q", k, inst.Attrs[k], v)
		}
	}
	if err := b.Stop(ctx, inst); !errors.Is(err, platform.ErrNotStoppable) {
		t.Errorf("Stop of a non-stoppable type: %v, want ErrNotStoppable", err)
	}
	if n := len(f.CallsOf("stop", "")); n != 0 {
		t.Errorf("%d brev stop calls for a type known not to stop", n)
	}
	// Without the attribute, brev itself refuses (v0.6.327+).
	delete(inst.Attrs, "stoppable")
	if err := b.Stop(ctx, inst); !errors.Is(err, platform.ErrNotStoppable) {
		t.Errorf("Stop refused by brev: %v, want ErrNotStoppable", err)
	}
	if s := f.Status(inst.Ref); s != "RUNNING" {
		t.Errorf("after a refused stop the instance is %s", s)
	}
}

// TestParseSearchRefuses: an answer of brev search with an entry no real
// brev prints is refused whole, saying which entry and why: a type that
// would not reach brev create as one type, a text with a control
// character, a number that is negative or not finite.
func TestParseSearchRefuses(t *testing.T) {
	good := `{"type":"n1-highmem-4:nvidia-tesla-t4:1","cloud":"gcp","provider":"gcp","gpu_name":"T4","gpu_count":1,"price_per_hour":0.45}`
	if offers, err := ParseSearch([]byte("[" + good + "]")); err != nil || len(offers) != 1 || offers[0].Type != "n1-highmem-4:nvidia-tesla-t4:1" {
		t.Fatalf("a genuine entry: %+v, %v", offers, err)
	}
	for name, c := range map[string]struct{ item, want string }{
		"comma":            {`{"type":"g5.xlarge,p5.48xlarge","price_per_hour":0.01}`, `entry 2 (type "g5.xlarge,p5.48xlarge") has a type holding a comma`},
		"flag":             {`{"type":"--dry-run"}`, `has a type starting with '-'`},
		"space":            {`{"type":"g5 xlarge"}`, `has a type holding a space`},
		"tab":              {`{"type":"g5\txlarge"}`, `has a type holding a space`},
		"osc in type":      {`{"type":"g5\u001b]52;c;aGk=\u0007"}`, `(type "g5\x1b]52;c;aGk=\a") has a type holding a control character`},
		"escape in gpu":    {`{"type":"g5.xlarge","gpu_name":"A10G\u001b[2K"}`, `has a gpu_name holding a control character`},
		"c1 in provider":   {`{"type":"g5.xlarge","provider":"aws\u009b"}`, `has a provider holding a control character`},
		"del in cloud":     {`{"type":"g5.xlarge","cloud":"aws\u007f"}`, `has a cloud holding a control character`},
		"negative price":   {`{"type":"g5.xlarge","price_per_hour":-98.32}`, `has price_per_hour -98.32 (it must be a finite number, 0 or more)`},
		"negative gpus":    {`{"type":"g5.xlarge","gpu_count":-1}`, `has gpu_count -1`},
		"negative vram":    {`{"type":"g5.xlarge","vram_per_gpu_gb":-24}`, `has vram_per_gpu_gb -24`},
		"negative boot":    {`{"type":"g5.xlarge","boot_time_seconds":-1}`, `has boot_time_seconds -1`},
		"infinite price":   {`{"type":"g5.xlarge","price_per_hour":1e999}`, `not a list of instance types`},
		"long type":        {`{"type":"` + strings.Repeat("g", 200) + `"}`, `has a type of 200 bytes (at most 128)`},
		"long gpu name":    {`{"type":"g5.xlarge","gpu_name":"` + strings.Repeat("A", 200) + `"}`, `has a gpu_name of 200 bytes`},
		"string for price": {`{"type":"g5.xlarge","price_per_hour":"-1"}`, `not a list of instance types`},
	} {
		t.Run(name, func(t *testing.T) {
			offers, err := ParseSearch([]byte("[" + good + "," + c.item + "]"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseSearch = %+v, %v; want an error saying %q", offers, err, c.want)
			}
			if strings.ContainsAny(err.Error(), "\x1b\x07\u009b\x7f") {
				t.Errorf("the error %q holds a control character", err)
			}
		})
	}
}
