package bench

import (
	"strings"
	"testing"
	"time"
)

// TestFmtAxis: axis labels print the value they stand at. The former
// formatter ("%.0fk") printed 1250 as "1k" and 3750 as "4k".
func TestFmtAxis(t *testing.T) {
	for v, want := range map[float64]string{
		0:                   "0",
		0.25:                "0.25",
		0.1 * 1.5:           "0.15",
		0.5:                 "0.5",
		20:                  "20",
		625:                 "625",
		1000:                "1000",
		1250:                "1250",
		3750:                "3750",
		5000:                "5000",
		10_000:              "10k",
		12_500:              "12.5k",
		1_000_000:           "1000k",
		2.5 * 3 / 4 * 1000:  "1875",
		0.002 * 5:           "0.01",
		100_000 * 0.1 * 0.3: "3000",
	} {
		if got := fmtAxis(v); got != want {
			t.Errorf("fmtAxis(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestChartSVG: the chart labels both log axes as such and draws every
// series it is given, pglock's included, leaving out points with no value.
func TestChartSVG(t *testing.T) {
	var series []Series
	for _, name := range []string{"fencegate tx", "pglock, heartbeat on"} {
		for _, keys := range []string{"one key", "distinct keys"} {
			s := Series{Name: name, Keys: keys, Net: "loopback", Writers: []int{1, 16, 64}, OpsPerS: []float64{1250, 3750, 2000}, P99: []time.Duration{time.Millisecond, 3 * time.Millisecond, 9 * time.Millisecond}}
			if name != "fencegate tx" {
				s.OpsPerS = []float64{2, 0, 1.5}
				s.P99 = []time.Duration{time.Second, 0, 2 * time.Second}
			}
			series = append(series, s)
		}
	}
	svg := ChartSVG(series)
	for _, want := range []string{"writers (log scale)", "throughput (ops/s, log scale)", "p99 latency (ms, log scale)", ">pglock, heartbeat on<", ">1000<", ">10k<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
	if strings.Contains(svg, "NaN") || strings.Contains(svg, "Inf") {
		t.Errorf("chart has a NaN or Inf coordinate")
	}
	if got := strings.Count(svg, "<polyline"); got != 8 {
		t.Errorf("%d lines, want 8 (2 series × 2 key patterns × 2 metrics)", got)
	}
}
