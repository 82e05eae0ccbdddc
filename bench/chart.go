package bench

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

var chartColors = []string{"#1f77b4", "#2ca02c", "#d62728", "#ff7f0e", "#9467bd", "#7f7f7f", "#8c564b", "#e377c2"}

// ChartSVG draws throughput and p99 against writers, one panel per metric
// and key pattern, one line per variant and network (solid for the first
// network, dashed for the others). Both axes are logarithmic, and say so:
// writers go 1, 16, 64, and pglock's lease-long waits sit three decades
// below the others' throughput. A point with no value (a variant that
// completed nothing) is left out of its line.
func ChartSVG(series []Series) string {
	const (
		pw, ph  = 420.0, 260.0 // panel size
		ml, mt  = 70.0, 40.0   // margins inside a panel
		plotW   = pw - ml - 20
		plotH   = ph - mt - 50
		cols    = 2
		rowsN   = 2
		width   = pw * cols
		legendY = ph * rowsN
	)
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
	// The legend's rows, laid out first so the picture's height fits them.
	type item struct {
		x, y float64
		name string
	}
	var legend []item
	lx0, ly0 := 10.0, legendY+4
	for _, n := range names {
		w := 24 + 6.5*float64(len(n))
		if lx0+w > width {
			lx0, ly0 = 10, ly0+16
		}
		legend = append(legend, item{lx0, ly0, n})
		lx0 += w
	}
	height := ly0 + 16 + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
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
		minY, maxY := math.Inf(1), math.Inf(-1)
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
				if v := val(s, i); v > 0 && !math.IsInf(v, 0) {
					minY, maxY = math.Min(minY, v), math.Max(maxY, v)
				}
				minW, maxW = min(minW, w), max(maxW, w)
			}
		}
		if len(ss) == 0 || maxY < minY {
			continue
		}
		lo, hi := math.Floor(math.Log10(minY)), math.Ceil(math.Log10(maxY))
		if hi <= lo {
			hi = lo + 1
		}
		lx := func(w int) float64 {
			if maxW == minW {
				return x0 + plotW/2
			}
			return x0 + plotW*(math.Log(float64(w))-math.Log(float64(minW)))/(math.Log(float64(maxW))-math.Log(float64(minW)))
		}
		ly := func(v float64) float64 { return y0 + plotH - plotH*(math.Log10(v)-lo)/(hi-lo) }
		title := map[string]string{"ops/s": "throughput (ops/s, log scale)", "p99 ms": "p99 latency (ms, log scale)"}[p.metric]
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="13" font-weight="bold">%s, %s</text>`+"\n", x0, y0-15, p.keys, title)
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0, y0, plotW, plotH)
		for _, v := range logTicks(lo, hi) {
			y := ly(v)
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0, y, x0+plotW, y, x0-5, y+4, fmtAxis(v))
		}
		ws := map[int]bool{}
		for _, s := range ss {
			for _, w := range s.Writers {
				ws[w] = true
			}
		}
		for _, w := range slices.Sorted(func(yield func(int) bool) {
			for w := range ws {
				if !yield(w) {
					return
				}
			}
		}) {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%d</text>`+"\n", lx(w), y0+plotH+15, w)
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">writers (log scale)</text>`+"\n", x0+plotW/2, y0+plotH+32)
		for _, s := range ss {
			var pts []string
			for i, w := range s.Writers {
				if v := val(s, i); v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", lx(w), ly(v)))
				}
			}
			if len(pts) == 0 {
				continue
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
	for _, it := range legend {
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", it.x, it.y, color(it.name), it.x+16, it.y+10, it.name)
	}
	if len(nets) > 1 {
		fmt.Fprintf(&b, `<text x="10" y="%.0f">solid: %s; dashed: %s</text>`+"\n", height-6, nets[0], strings.Join(nets[1:], ", "))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// logTicks returns the gridlines of a log axis from 10^lo to 10^hi: every
// power of ten, and 2 and 5 times it when the axis spans three decades or
// fewer.
func logTicks(lo, hi float64) []float64 {
	var ticks []float64
	steps := []float64{1}
	if hi-lo <= 3 {
		steps = []float64{1, 2, 5}
	}
	for e := lo; e <= hi; e++ {
		for _, m := range steps {
			if e == hi && m > 1 {
				break
			}
			ticks = append(ticks, m*math.Pow(10, e))
		}
	}
	return ticks
}

// fmtAxis labels an axis value exactly, in the shortest form: 1250 is
// "1250" and 12500 "12.5k", never rounded to another value; a float's
// representation error (0.15000000000000002) is not printed.
func fmtAxis(v float64) string {
	if v >= 10_000 {
		return fmtAxis(v/1000) + "k"
	}
	// Six significant digits take off a product's last-bit noise.
	v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return strconv.FormatFloat(v, 'f', -1, 64)
}
