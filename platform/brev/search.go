package brev

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/taoflow/taoflow/platform"
)

var _ platform.Searcher = (*Brev)(nil)

// searchItem is one element of `brev search --json`.
type searchItem struct {
	Type         string  `json:"type"`
	Cloud        string  `json:"cloud"`
	Provider     string  `json:"provider"`
	GPUName      string  `json:"gpu_name"`
	GPUCount     int     `json:"gpu_count"`
	VRAMPerGPU   float64 `json:"vram_per_gpu_gb"`
	DiskMinGB    float64 `json:"disk_min_gb"`
	DiskMaxGB    float64 `json:"disk_max_gb"`
	BootSeconds  int     `json:"boot_time_seconds"`
	Stoppable    bool    `json:"stoppable"`
	PricePerHour float64 `json:"price_per_hour"`
}

// ParseSearch reads the output of `brev search --json`: a JSON array, []
// when nothing matches. An answer with an entry no real brev prints (see
// refuseItem) is an error: taoflow trusts none of it.
func ParseSearch(out []byte) ([]platform.Offer, error) {
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return nil, fmt.Errorf("brev search --json printed something that is not a JSON array (output begins %s)", quoteStart(trimmed))
	}
	var items []searchItem
	if err := json.Unmarshal(trimmed, &items); err != nil {
		return nil, fmt.Errorf("brev search --json printed an array that is not a list of instance types: %w (output begins %s)", err, quoteStart(trimmed))
	}
	offers := make([]platform.Offer, 0, len(items))
	for i, it := range items {
		if it.Type == "" {
			continue
		}
		if why := refuseItem(it); why != "" {
			return nil, fmt.Errorf("brev search --json listed an instance type that taoflow refuses: entry %d (type %q) %s; the real brev never prints this: check which brev runs (its path), and use --brev-binary to name one", i+1, it.Type, why)
		}
		provider := it.Provider
		if provider == "" {
			provider = it.Cloud
		}
		offers = append(offers, platform.Offer{Type: it.Type, Provider: provider, GPU: it.GPUName, GPUs: it.GPUCount,
			VRAM: it.VRAMPerGPU, Disk: max(it.DiskMaxGB, it.DiskMinGB), Stoppable: it.Stoppable,
			Boot: time.Duration(it.BootSeconds) * time.Second, PricePerHour: it.PricePerHour, Available: true})
	}
	return offers, nil
}

// maxSearchText bounds each text of an entry of brev search's answer.
const maxSearchText = 128

// refuseItem says why an entry of brev search's answer cannot be trusted,
// "" when it can: a type that would not reach brev create as one type (a
// comma makes a fallback chain that no filter checked, a leading '-' a
// flag, a space or a control character several words or a terminal
// escape), a text holding a control character (it reaches the terminal),
// or a number that is negative or not finite (a negative price makes every
// cost negative, and max_cost could never trip).
func refuseItem(it searchItem) string {
	switch {
	case len(it.Type) > maxSearchText:
		return fmt.Sprintf("has a type of %d bytes (at most %d)", len(it.Type), maxSearchText)
	case strings.HasPrefix(it.Type, "-"):
		return "has a type starting with '-' (it would read as a flag)"
	case strings.Contains(it.Type, ","):
		return "has a type holding a comma (a comma separates the types of a fallback chain)"
	case strings.IndexFunc(it.Type, unicode.IsSpace) >= 0:
		return "has a type holding a space"
	}
	for _, f := range []struct{ name, v string }{{"type", it.Type}, {"cloud", it.Cloud}, {"provider", it.Provider}, {"gpu_name", it.GPUName}} {
		switch {
		case len(f.v) > maxSearchText:
			return fmt.Sprintf("has a %s of %d bytes (at most %d)", f.name, len(f.v), maxSearchText)
		case !utf8.ValidString(f.v):
			return fmt.Sprintf("has a %s that is not UTF-8", f.name)
		case strings.IndexFunc(f.v, unicode.IsControl) >= 0:
			return fmt.Sprintf("has a %s holding a control character", f.name)
		}
	}
	for _, n := range []struct {
		name string
		v    float64
	}{{"price_per_hour", it.PricePerHour}, {"vram_per_gpu_gb", it.VRAMPerGPU}, {"disk_min_gb", it.DiskMinGB}, {"disk_max_gb", it.DiskMaxGB},
		{"gpu_count", float64(it.GPUCount)}, {"boot_time_seconds", float64(it.BootSeconds)}} {
		if n.v < 0 || math.IsNaN(n.v) || math.IsInf(n.v, 0) {
			return fmt.Sprintf("has %s %v (it must be a finite number, 0 or more)", n.name, n.v)
		}
	}
	return ""
}

// searchArgs are the arguments of `brev search` for the filters brev has
// (GPU name, VRAM per GPU, disk, stoppable, provider); the GPU count and
// the price cap it lacks are applied to its answer.
func searchArgs(f platform.Filter) []string {
	args := []string{"search", "--json", "--sort", "price"}
	num := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	if f.GPU != "" {
		args = append(args, "--gpu-name", f.GPU)
	}
	if f.MinVRAM > 0 {
		args = append(args, "--min-vram", num(f.MinVRAM))
	}
	if f.MinDisk > 0 {
		args = append(args, "--min-disk", num(f.MinDisk))
	}
	if f.Stoppable {
		args = append(args, "--stoppable")
	}
	if f.Provider != "" {
		args = append(args, "--provider", f.Provider)
	}
	return args
}

// Search runs `brev search --json` with the filters brev has (stdin
// /dev/null, as every call) and applies the others — the GPU count, the
// price cap and Types — to its answer (platform.Searcher). The offers come
// cheapest first, or in the order of filter.Types when it has types. It
// needs the CLI but no login: it does not run Check.
func (b *Brev) Search(ctx context.Context, f platform.Filter) ([]platform.Offer, error) {
	bin, err := b.searchBinary(ctx)
	if err != nil {
		return nil, err
	}
	for _, v := range []string{f.GPU, f.Provider} {
		if v != "" && v[0] == '-' {
			return nil, fmt.Errorf("brev search: %q cannot be a filter value (it would read as a flag)", v)
		}
	}
	out, err := b.callWith(ctx, bin, searchArgs(f)...)
	if err != nil {
		return nil, err
	}
	all, err := ParseSearch(out)
	if err != nil {
		return nil, err
	}
	var keep []platform.Offer
	for _, o := range all {
		if f.GPUs > 0 && o.GPUs != f.GPUs || f.MaxPrice > 0 && o.PricePerHour > f.MaxPrice {
			continue
		}
		if f.Types != nil && !slices.Contains(f.Types, o.Type) {
			continue
		}
		keep = append(keep, o)
	}
	if f.Types != nil {
		sort.SliceStable(keep, func(i, j int) bool {
			return slices.Index(f.Types, keep[i].Type) < slices.Index(f.Types, keep[j].Type)
		})
	} else {
		sort.SliceStable(keep, func(i, j int) bool { return keep[i].PricePerHour < keep[j].PricePerHour })
	}
	return keep, nil
}

// searchBinary finds the brev CLI and checks its version (`brev --version
// --no-check-latest`, once), as Check does, without Check's `brev ls`:
// search needs no login. A CLI too old for taoflow is refused before
// anything else runs.
func (b *Brev) searchBinary(ctx context.Context) (string, error) {
	b.checkMu.Lock()
	done := b.bin
	b.checkMu.Unlock()
	if done != "" {
		return done, nil
	}
	bin, _, err := b.binaryVersion(ctx)
	return bin, err
}

// offerAttrs are the Attrs of an instance of type typ, from offers: its
// price ("price_per_hour", dollars) and whether it can be stopped
// ("stoppable", true or false); none when offers do not list typ.
func offerAttrs(attrs map[string]string, typ string, offers []platform.Offer) {
	for _, o := range offers {
		if o.Type == typ {
			attrs["price_per_hour"] = strconv.FormatFloat(o.PricePerHour, 'f', -1, 64)
			attrs["stoppable"] = strconv.FormatBool(o.Stoppable)
			if o.GPU != "" {
				attrs["gpu"] = fmt.Sprintf("%dx %s", o.GPUs, o.GPU)
			}
			return
		}
	}
}
