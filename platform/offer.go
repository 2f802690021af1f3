package platform

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Offer is one instance type a platform rents, as its catalogue lists it
// (brev search): what it has and what it costs. Prices are the platform's
// list prices, so every cost taoflow shows from them is an estimate.
type Offer struct {
	Type     string  `json:"type"`
	Provider string  `json:"provider,omitempty"`
	GPU      string  `json:"gpu"`  // the GPU's name, e.g. "A100-80GB"
	GPUs     int     `json:"gpus"` // how many
	VRAM     float64 `json:"vram_gb"`
	Disk     float64 `json:"disk_gb"` // the most disk it can have
	// Stoppable: the instance can be stopped, keeping its disk (and
	// billing only for that); otherwise it can only be deleted.
	Stoppable bool `json:"stoppable"`
	// Boot is the estimated time from create to running.
	Boot time.Duration `json:"-"`
	// PricePerHour is the list price in US dollars per hour.
	PricePerHour float64 `json:"price_per_hour"`
	// Available is false for a type listed without capacity now.
	Available bool `json:"-"`
}

// Filter selects instance types by what they offer. Zero fields select
// everything.
type Filter struct {
	// Types keeps only these types, in this order of preference.
	Types []string
	// GPU keeps types whose GPU name contains it, ignoring case (as brev
	// matches: "A100" matches "A100" and "A100-80GB").
	GPU string
	// GPUs keeps types with exactly this many GPUs.
	GPUs int
	// MinVRAM is the least memory per GPU, in GB.
	MinVRAM float64
	// MinDisk is the least disk, in GB.
	MinDisk float64
	// MaxPrice is the most dollars per hour.
	MaxPrice float64
	// Stoppable keeps only types that can be stopped.
	Stoppable bool
	// Provider keeps the types of one provider (or cloud).
	Provider string
}

// IsZero reports whether f selects by nothing but Types.
func (f Filter) IsZero() bool {
	return f.GPU == "" && f.GPUs == 0 && f.MinVRAM == 0 && f.MinDisk == 0 && f.MaxPrice == 0 && !f.Stoppable && f.Provider == ""
}

// Excludes says which of f's filters o fails, in the plan's words
// ("max_price: $3.29/h is over $3.00/h"), or "" when o passes them all.
// Types is not checked: it orders as much as it filters.
func (f Filter) Excludes(o Offer) string {
	switch {
	case f.GPU != "" && !strings.Contains(strings.ToLower(o.GPU), strings.ToLower(f.GPU)):
		return fmt.Sprintf("gpu: its GPU is %s, not %s", o.GPU, f.GPU)
	case f.GPUs > 0 && o.GPUs != f.GPUs:
		return fmt.Sprintf("gpus: it has %d, not %d", o.GPUs, f.GPUs)
	case o.VRAM < f.MinVRAM:
		return fmt.Sprintf("min_vram: %g GB per GPU is under %g", o.VRAM, f.MinVRAM)
	case f.MinDisk > 0 && o.Disk < f.MinDisk:
		return fmt.Sprintf("min_disk: at most %g GB is under %g", o.Disk, f.MinDisk)
	case f.Stoppable && !o.Stoppable:
		return "stoppable: it cannot be stopped"
	case f.Provider != "" && !strings.EqualFold(o.Provider, f.Provider):
		return fmt.Sprintf("provider: it is %s, not %s", o.Provider, f.Provider)
	case f.MaxPrice > 0 && o.PricePerHour > f.MaxPrice:
		return fmt.Sprintf("max_price: %s/h is over %s/h", Dollars(o.PricePerHour), Dollars(f.MaxPrice))
	}
	return ""
}

// Searcher is a Platform that lists the instance types it rents, with
// their prices: Search returns those that pass filter, in the order to
// try them (filter.Types' order when it has types, else cheapest first).
// It needs no login and creates nothing.
type Searcher interface {
	Search(ctx context.Context, filter Filter) ([]Offer, error)
}

// ErrNotStoppable is Stopper.Stop's error for an instance whose type
// cannot be stopped: it can only be deleted (or left running).
var ErrNotStoppable = errors.New("its instance type cannot be stopped")

// Dollars formats an amount of US dollars: "$4.35", "$0.0042" under a
// cent.
func Dollars(v float64) string {
	if v != 0 && v < 0.01 && v > -0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}
