package steps

import (
	"testing"
	"time"
)

// TestManifestCost: the manifest's cost is the uptime since billed_from
// at the instance's list price; without a price or a start there is none.
func TestManifestCost(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	from := now.Add(-90 * time.Minute).Format(time.RFC3339Nano)
	c := manifestCost(map[string]string{"price_per_hour": "3.29", "billed_from": from}, now)
	if c == nil || c.UptimeSeconds != 5400 || c.Cost != 4.935 || c.PricePerHour != 3.29 || c.Currency != "USD" {
		t.Errorf("manifestCost = %+v, want 5400 s, $4.935", c)
	}
	for name, attrs := range map[string]map[string]string{
		"no price": {"billed_from": from},
		"no start": {"price_per_hour": "3.29"},
		"local":    {"type": "sandbox"},
	} {
		if c := manifestCost(attrs, now); c != nil {
			t.Errorf("%s: manifestCost = %+v, want nil", name, c)
		}
	}
}
