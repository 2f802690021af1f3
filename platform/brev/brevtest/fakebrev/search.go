package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/taoflow/taoflow/platform/brev/brevtest/internal/fakestate"
)

// offer is one instance type of the fake catalogue, with the keys of
// `brev search --json` (shared/reference/brev-cli.md, "brev search").
// Available is not printed: false marks a type the catalogue lists but
// that has no capacity now, so create skips it.
type offer struct {
	Type            string  `json:"type"`
	Cloud           string  `json:"cloud"`
	Provider        string  `json:"provider"`
	GPUName         string  `json:"gpu_name"`
	GPUCount        int     `json:"gpu_count"`
	VRAMPerGPU      float64 `json:"vram_per_gpu_gb"`
	TotalVRAM       float64 `json:"total_vram_gb"`
	Capability      float64 `json:"capability"`
	VCPUs           int     `json:"vcpus"`
	Memory          string  `json:"memory"`
	RAMGB           float64 `json:"ram_gb"`
	Arch            string  `json:"arch"`
	DiskMinGB       float64 `json:"disk_min_gb"`
	DiskMaxGB       float64 `json:"disk_max_gb"`
	TargetDiskGB    float64 `json:"target_disk_gb"`
	DiskPricePerGB  float64 `json:"disk_price_per_gb_mo,omitempty"`
	BootTimeSeconds int     `json:"boot_time_seconds"`
	Stoppable       bool    `json:"stoppable"`
	Rebootable      bool    `json:"rebootable"`
	FlexPorts       bool    `json:"flex_ports"`
	PricePerHour    float64 `json:"price_per_hour"`
	Available       bool    `json:"-"`
}

// catalogue is the fake's instance types: GPU, price, stoppability and
// capacity. gpu_1x_h100_pcie is listed but out of capacity, and the
// lambda types cannot be stopped.
var catalogue = []offer{
	mk("n1-highmem-4:nvidia-tesla-t4:1", "gcp", "gcp", "T4", 1, 16, 7.5, 4, 26, 100, 2000, 180, true, 0.45, true),
	mk("g6.xlarge", "aws", "aws", "L4", 1, 24, 8.9, 4, 16, 250, 16000, 240, true, 0.98, true),
	mk("g5.xlarge", "aws", "aws", "A10G", 1, 24, 8.6, 4, 16, 250, 16000, 240, true, 1.21, true),
	mk("g5.2xlarge", "aws", "aws", "A10G", 1, 24, 8.6, 8, 32, 450, 16000, 240, true, 1.45, true),
	mk("gpu_1x_a100_sxm4", "lambda", "lambda-labs", "A100", 1, 40, 8.0, 30, 200, 512, 512, 420, false, 1.79, true),
	mk("g6e.xlarge", "aws", "aws", "L40S", 1, 48, 8.9, 4, 32, 250, 16000, 300, true, 2.24, true),
	mk("gpu_1x_h100_pcie", "lambda", "lambda-labs", "H100", 1, 80, 9.0, 26, 200, 1000, 1000, 420, false, 2.49, false),
	mk("gpu_1x_a100_80gb_sxm4", "lambda", "lambda-labs", "A100-80GB", 1, 80, 8.0, 30, 200, 512, 512, 420, false, 2.59, true),
	mk("gpu_1x_h100_sxm5", "lambda", "lambda-labs", "H100", 1, 80, 9.0, 26, 225, 2750, 2750, 420, false, 3.29, true),
	mk("gpu_1x_h200", "nebius", "nebius", "H200", 1, 141, 9.0, 16, 200, 1000, 1000, 600, true, 3.99, true),
	mk("a2-ultragpu-1g", "gcp", "gcp", "A100-80GB", 1, 80, 8.0, 12, 170, 500, 16000, 360, true, 5.07, true),
	mk("gpu_8x_h100_sxm5", "lambda", "lambda-labs", "H100", 8, 80, 9.0, 208, 1800, 22000, 22000, 600, false, 23.92, true),
	mk("p4d.24xlarge", "aws", "aws", "A100", 8, 40, 8.0, 96, 1152, 8000, 16000, 600, true, 32.77, true),
	mk("p5.48xlarge", "aws", "aws", "H100", 8, 80, 9.0, 192, 2048, 30000, 30000, 900, true, 98.32, true),
}

func mk(typ, cloud, provider, gpu string, count int, vram, capability float64, vcpus int, ram, diskMin, diskMax float64, boot int, stoppable bool, price float64, available bool) offer {
	o := offer{Type: typ, Cloud: cloud, Provider: provider, GPUName: gpu, GPUCount: count, VRAMPerGPU: vram,
		TotalVRAM: vram * float64(count), Capability: capability, VCPUs: vcpus, Memory: fmt.Sprintf("%gGiB", ram), RAMGB: ram,
		Arch: "x86_64", DiskMinGB: diskMin, DiskMaxGB: diskMax, TargetDiskGB: diskMin, BootTimeSeconds: boot,
		Stoppable: stoppable, Rebootable: true, PricePerHour: price, Available: available}
	if diskMax > diskMin {
		o.DiskPricePerGB = 0.10
	}
	return o
}

// lookup returns the catalogue's offer of type typ.
func lookup(typ string) (offer, bool) {
	for _, o := range catalogue {
		if o.Type == typ {
			return o, true
		}
	}
	return offer{}, false
}

// searchFilters are the filters search and create share.
type searchFilters struct {
	gpuName, provider, arch, sort          string
	minVRAM, minTotalVRAM, minCap, minRAM  float64
	minDisk                                float64
	minVCPU, maxBoot                       int
	stoppable, rebootable, flexPorts, desc bool
}

func (f *searchFilters) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.gpuName, "gpu-name", "g", "", "filter by GPU name (case-insensitive substring)")
	fl.StringVarP(&f.provider, "provider", "p", "", "filter by provider")
	fl.Float64VarP(&f.minVRAM, "min-vram", "v", 0, "minimum VRAM per GPU (GB)")
	fl.Float64VarP(&f.minTotalVRAM, "min-total-vram", "t", 0, "minimum total VRAM (GB)")
	fl.Float64VarP(&f.minCap, "min-capability", "c", 0, "minimum compute capability")
	fl.Float64Var(&f.minRAM, "min-ram", 0, "minimum RAM (GB)")
	fl.Float64Var(&f.minDisk, "min-disk", 0, "minimum disk (GB)")
	fl.IntVar(&f.minVCPU, "min-vcpu", 0, "minimum vCPUs")
	fl.IntVar(&f.maxBoot, "max-boot-time", 0, "maximum boot time (minutes)")
	fl.StringVar(&f.arch, "arch", "", "architecture")
	fl.BoolVar(&f.stoppable, "stoppable", false, "only stoppable types")
	fl.BoolVar(&f.rebootable, "rebootable", false, "only rebootable types")
	fl.BoolVar(&f.flexPorts, "flex-ports", false, "only types with flexible ports")
	fl.StringVarP(&f.sort, "sort", "s", "price", "sort by: price, gpu-count, vram, total-vram, vcpu, type, provider, disk, boot-time")
	fl.BoolVarP(&f.desc, "desc", "d", false, "sort descending")
}

// any reports whether some filter is set.
func (f *searchFilters) any() bool {
	return f.gpuName != "" || f.provider != "" || f.arch != "" || f.minVRAM > 0 || f.minTotalVRAM > 0 || f.minCap > 0 ||
		f.minRAM > 0 || f.minDisk > 0 || f.minVCPU > 0 || f.maxBoot > 0 || f.stoppable || f.rebootable || f.flexPorts
}

var sortKeys = map[string]func(o offer) float64{
	"price":      func(o offer) float64 { return o.PricePerHour },
	"gpu-count":  func(o offer) float64 { return float64(o.GPUCount) },
	"vram":       func(o offer) float64 { return o.VRAMPerGPU },
	"total-vram": func(o offer) float64 { return o.TotalVRAM },
	"vcpu":       func(o offer) float64 { return float64(o.VCPUs) },
	"disk":       func(o offer) float64 { return o.DiskMaxGB },
	"boot-time":  func(o offer) float64 { return float64(o.BootTimeSeconds) },
}

// match returns the catalogue's offers that pass f, sorted by f.sort.
func (f *searchFilters) match() ([]offer, error) {
	key, ok := sortKeys[f.sort]
	if !ok && f.sort != "type" && f.sort != "provider" {
		valid := []string{"type", "provider"}
		for k := range sortKeys {
			valid = append(valid, k)
		}
		sort.Strings(valid)
		return nil, fmt.Errorf("invalid sort option %q: valid options are %s", f.sort, strings.Join(valid, ", "))
	}
	out := []offer{}
	for _, o := range catalogue {
		switch {
		case f.gpuName != "" && !strings.Contains(strings.ToLower(o.GPUName), strings.ToLower(f.gpuName)):
		case f.provider != "" && !strings.EqualFold(o.Provider, f.provider) && !strings.EqualFold(o.Cloud, f.provider):
		case f.arch != "" && !strings.EqualFold(o.Arch, f.arch):
		case o.VRAMPerGPU < f.minVRAM, o.TotalVRAM < f.minTotalVRAM, o.Capability < f.minCap, o.RAMGB < f.minRAM:
		case f.minDisk > 0 && o.DiskMaxGB < f.minDisk:
		case o.VCPUs < f.minVCPU:
		case f.maxBoot > 0 && o.BootTimeSeconds > f.maxBoot*60:
		case f.stoppable && !o.Stoppable, f.rebootable && !o.Rebootable, f.flexPorts && !o.FlexPorts:
		default:
			if f.minDisk > o.DiskMinGB && f.minDisk <= o.DiskMaxGB {
				o.TargetDiskGB = f.minDisk
			}
			out = append(out, o)
		}
	}
	less := func(a, b offer) bool {
		switch f.sort {
		case "type":
			return a.Type < b.Type
		case "provider":
			return a.Provider < b.Provider
		}
		return key(a) < key(b)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if f.desc {
			return less(out[j], out[i])
		}
		return less(out[i], out[j])
	})
	return out, nil
}

func (a *app) searchCmd() *cobra.Command {
	var f searchFilters
	var asJSON, wide bool
	cmd := &cobra.Command{
		Use:   "search [gpu|cpu]",
		Short: "Search GPU instance types",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var failed bool
			var extra []json.RawMessage
			if err := fakestate.Update(a.dir, func(s *fakestate.State) error {
				failed = s.TakeFault(fakestate.FaultSearchError, "")
				extra = s.Options.ExtraOffers
				return nil
			}); err != nil {
				return err
			}
			if failed {
				// The catalogue is a public GET, no login: a network error.
				return errors.New(`Get "https://api.brev.dev/v1/instance/types": dial tcp: lookup api.brev.dev: i/o timeout`)
			}
			if len(args) == 1 && args[0] == "cpu" {
				if asJSON {
					fmt.Fprintln(a.stdout, "[]")
				}
				return nil
			}
			offers, err := f.match()
			if err != nil {
				return err
			}
			if asJSON {
				items := append(make([]json.RawMessage, 0, len(extra)+len(offers)), extra...)
				for _, o := range offers {
					b, err := json.Marshal(o)
					if err != nil {
						return err
					}
					items = append(items, b)
				}
				b, err := json.MarshalIndent(items, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, string(b))
				return nil
			}
			rows := [][]string{{"TYPE", "GPU", "COUNT", "VRAM/GPU", "DISK", "PROVIDER", "STOPPABLE", "$/HR"}}
			for _, o := range offers {
				rows = append(rows, []string{o.Type, o.GPUName, fmt.Sprint(o.GPUCount), fmt.Sprintf("%gGB", o.VRAMPerGPU),
					fmt.Sprintf("%gGB", o.TargetDiskGB), o.Provider, fmt.Sprint(o.Stoppable), fmt.Sprintf("$%.2f", o.PricePerHour)})
			}
			fmt.Fprint(a.stdout, table(rows))
			if a.stdoutTTY {
				fmt.Fprintf(a.stdout, "\nFound %d GPU instance types\n", len(offers))
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "output as JSON")
	cmd.Flags().BoolVarP(&wide, "wide", "w", false, "show more columns")
	return cmd
}
