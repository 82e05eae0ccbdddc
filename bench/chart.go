package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

var chartColors = []string{"#1f77b4", "#2ca02c", "#d62728", "#ff7f0e", "#9467bd", "#7f7f7f", "#8c564b", "#e377c2"}

// ChartSVG draws throughput and p99 against writers, one panel per metric
// and key pattern, one line per variant and network (solid for the first
// network, dashed for the others), on log-scaled writer axes.
func ChartSVG(series []Series) string {
	const (
		pw, ph  = 420.0, 260.0 // panel size
		ml, mt  = 70.0, 40.0   // margins inside a panel
		plotW   = pw - ml - 20
		plotH   = ph - mt - 45
		legendH = 50.0
		cols    = 2
		rowsN   = 2
		width   = pw * cols
		height  = ph*rowsN + legendH
	)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	names := []string{}
	seen := map[string]bool{}
	var nets []string
	for _, s := range series {
		if !seen[s.Name] {
			seen[s.Name] = true
			names = append(names, s.Name)
		}
		if !slices.Contains(nets, s.Net) {
			nets = append(nets, s.Net)
		}
	}
	color := func(name string) string {
		for i, n := range names {
			if n == name {
				return chartColors[i%len(chartColors)]
			}
		}
		return "black"
	}
	panels := []struct {
		keys, metric string
		row, col     int
	}{
		{"one key", "ops/s", 0, 0}, {"distinct keys", "ops/s", 0, 1},
		{"one key", "p99 ms", 1, 0}, {"distinct keys", "p99 ms", 1, 1},
	}
	for _, p := range panels {
		x0, y0 := float64(p.col)*pw+ml, float64(p.row)*ph+mt
		var ss []Series
		var maxY float64
		minW, maxW := math.MaxInt, 1
		val := func(s Series, i int) float64 {
			if p.metric == "ops/s" {
				return s.OpsPerS[i]
			}
			return float64(s.P99[i]) / float64(time.Millisecond)
		}
		for _, s := range series {
			if s.Keys != p.keys {
				continue
			}
			ss = append(ss, s)
			for i, w := range s.Writers {
				maxY = math.Max(maxY, val(s, i))
				minW, maxW = min(minW, w), max(maxW, w)
			}
		}
		if len(ss) == 0 {
			continue
		}
		maxY = niceCeil(maxY)
		lx := func(w int) float64 {
			if maxW == minW {
				return x0 + plotW/2
			}
			return x0 + plotW*(math.Log(float64(w))-math.Log(float64(minW)))/(math.Log(float64(maxW))-math.Log(float64(minW)))
		}
		ly := func(v float64) float64 { return y0 + plotH - plotH*v/maxY }
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="13" font-weight="bold">%s, %s</text>`+"\n", x0, y0-15, p.keys, map[string]string{"ops/s": "throughput (ops/s)", "p99 ms": "p99 latency (ms)"}[p.metric])
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0, y0, plotW, plotH)
		for i := 0; i <= 4; i++ {
			v := maxY * float64(i) / 4
			y := ly(v)
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0, y, x0+plotW, y, x0-5, y+4, fmtAxis(v))
		}
		ws := map[int]bool{}
		for _, s := range ss {
			for _, w := range s.Writers {
				ws[w] = true
			}
		}
		for w := range ws {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%d</text>`+"\n", lx(w), y0+plotH+15, w)
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">writers</text>`+"\n", x0+plotW/2, y0+plotH+32)
		for _, s := range ss {
			var pts []string
			for i, w := range s.Writers {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", lx(w), ly(val(s, i))))
			}
			dash := ""
			if s.Net != nets[0] {
				dash = ` stroke-dasharray="5,3"`
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), color(s.Name), dash)
			for _, pt := range pts {
				xy := strings.Split(pt, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], color(s.Name))
			}
		}
	}
	x, y := 10.0, height-legendH+4
	for _, n := range names {
		w := 24 + 6.5*float64(len(n))
		if x+w > width {
			x, y = 10, y+16
		}
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", x, y, color(n), x+16, y+10, n)
		x += w
	}
	if len(nets) > 1 {
		fmt.Fprintf(&b, `<text x="10" y="%.0f">solid: %s; dashed: %s</text>`+"\n", height-4, nets[0], strings.Join(nets[1:], ", "))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fmtAxis(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.0fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}
