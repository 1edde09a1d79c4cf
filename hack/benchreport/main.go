// Command benchreport turns the benchmark results in bench/out/*.json
// (written by `make bench`) into one self-contained HTML page: per
// benchmark a table of its numbers, bars for its latencies, a strip plot
// of every list of samples, and line charts of a cost curve (a "curve"
// list of objects keyed by "clusters"). No scripts, styles or fonts are
// fetched: the page opens offline. `make bench-report` runs it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	in := flag.String("in", "bench/out", "directory of <benchmark>.json results")
	out := flag.String("out", "bench/out/report.html", "HTML file to write")
	flag.Parse()
	benches, err := load(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	if len(benches) == 0 {
		fmt.Fprintf(os.Stderr, "benchreport: no *.json results in %s (run `make bench` first)\n", *in)
		os.Exit(1)
	}
	f, err := os.Create(*out)
	if err == nil {
		err = render(f, benches)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (%d benchmarks)\n", *out, len(benches))
}

// bench is one benchmark's results, sorted for display.
type bench struct {
	Name    string
	Scalars []scalar
	// Latencies are the scalars in milliseconds, drawn as bars.
	Latencies []scalar
	Samples   []samples
	Curves    []curve
}

type scalar struct {
	Key   string
	Value float64
}

// samples is a list of numbers (a latency distribution).
type samples struct {
	Key    string
	Values []float64
}

// curve is one metric of a cost curve against cluster count.
type curve struct {
	Metric string
	Points [][2]float64
}

// load reads every *.json in dir.
func load(dir string) ([]bench, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []bench
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		b, err := parse(strings.TrimSuffix(filepath.Base(p), ".json"), data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// parse sorts one result's fields into scalars, latencies (keys with an
// "_ms" part), sample lists and the curve.
func parse(name string, data []byte) (bench, error) {
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		return bench{}, err
	}
	b := bench{Name: name}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := raw[k].(type) {
		case float64:
			b.Scalars = append(b.Scalars, scalar{k, v})
			if strings.HasSuffix(k, "_ms") || strings.Contains(k, "_ms_") {
				b.Latencies = append(b.Latencies, scalar{k, v})
			}
		case []any:
			if nums, ok := numbers(v); ok {
				b.Samples = append(b.Samples, samples{k, nums})
			} else {
				b.Curves = append(b.Curves, curves(v)...)
			}
		}
	}
	return b, nil
}

func numbers(list []any) ([]float64, bool) {
	out := make([]float64, 0, len(list))
	for _, v := range list {
		f, ok := v.(float64)
		if !ok {
			return nil, false
		}
		out = append(out, f)
	}
	return out, len(out) > 0
}

// curves reads a list of objects with a "clusters" field: one curve per
// other numeric field, in field order.
func curves(list []any) []curve {
	byMetric := map[string][][2]float64{}
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil
		}
		x, ok := m["clusters"].(float64)
		if !ok {
			return nil
		}
		for k, v := range m {
			if y, ok := v.(float64); ok && k != "clusters" {
				byMetric[k] = append(byMetric[k], [2]float64{x, y})
			}
		}
	}
	metrics := make([]string, 0, len(byMetric))
	for k := range byMetric {
		metrics = append(metrics, k)
	}
	sort.Strings(metrics)
	out := make([]curve, 0, len(metrics))
	for _, k := range metrics {
		pts := byMetric[k]
		sort.Slice(pts, func(i, j int) bool { return pts[i][0] < pts[j][0] })
		out = append(out, curve{k, pts})
	}
	return out
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 520.0, 200.0
	padL, padB     = 60.0, 30.0
)

// barsSVG draws horizontal bars of the latencies on one axis.
func barsSVG(vals []scalar) template.HTML {
	maxV := 0.0
	for _, v := range vals {
		maxV = math.Max(maxV, v.Value)
	}
	if maxV == 0 {
		maxV = 1
	}
	const rowH, labelW, barW = 22.0, 240.0, 260.0
	h := rowH*float64(len(vals)) + 8
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img">`, labelW+barW+80, h, labelW+barW+80, h)
	for i, v := range vals {
		y := 4 + rowH*float64(i)
		w := barW * v.Value / maxV
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" class="l">%s</text>`, labelW-6, y+14, template.HTMLEscapeString(v.Key))
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.1f" width="%.1f" height="16" class="bar"/>`, labelW, y+2, w)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="v">%s</text>`, labelW+w+4, y+14, format(v.Value))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from escaped text and numbers
}

// stripSVG draws each sample as a dot on a value axis, with the p50 and
// p95 marked: a latency distribution at a glance.
func stripSVG(s samples) template.HTML {
	vals := append([]float64(nil), s.Values...)
	sort.Float64s(vals)
	lo, hi := 0.0, vals[len(vals)-1]
	if hi == lo {
		hi = lo + 1
	}
	x := func(v float64) float64 { return padL + (chartW-padL-10)*(v-lo)/(hi-lo) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f 70" width="%.0f" height="70" role="img">`, chartW, chartW)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="40" x2="%.0f" y2="40" class="axis"/>`, padL, chartW-10)
	for i, v := range vals {
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" class="dot"/>`, x(v), 30-float64(i%5)*4)
	}
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p95", 0.95}} {
		v := percentile(vals, p.q)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="8" x2="%.1f" y2="44" class="mark"/><text x="%.1f" y="58" text-anchor="middle" class="v">%s %s</text>`,
			x(v), x(v), x(v), p.name, format(v))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="44" text-anchor="end" class="v">%s</text></svg>`, padL-6, format(lo))
	return template.HTML(b.String()) //nolint:gosec // built from numbers
}

// lineSVG draws one curve against the cluster count.
func lineSVG(c curve) template.HTML {
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), 0.0
	for _, p := range c.Points {
		minX, maxX, maxY = math.Min(minX, p[0]), math.Max(maxX, p[0]), math.Max(maxY, p[1])
	}
	if maxX == minX {
		maxX = minX + 1
	}
	if maxY == 0 {
		maxY = 1
	}
	x := func(v float64) float64 { return padL + (chartW-padL-20)*(v-minX)/(maxX-minX) }
	y := func(v float64) float64 { return chartH - padB - (chartH-padB-10)*v/maxY }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img">`, chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" class="axis"/>`, padL, chartH-padB, chartW-10, chartH-padB)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="10" x2="%.0f" y2="%.0f" class="axis"/>`, padL, padL, chartH-padB)
	fmt.Fprintf(&b, `<text x="%.0f" y="16" text-anchor="end" class="v">%s</text>`, padL-6, format(maxY))
	pts := make([]string, len(c.Points))
	for i, p := range c.Points {
		pts[i] = fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1]))
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" class="dot"/><text x="%.1f" y="%.0f" text-anchor="middle" class="v">%s</text>`,
			x(p[0]), y(p[1]), x(p[0]), chartH-padB+16, format(p[0]))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" class="v">%s</text>`, x(p[0]), y(p[1])-7, format(p[1]))
	}
	fmt.Fprintf(&b, `<polyline points="%s" class="line"/></svg>`, strings.Join(pts, " "))
	return template.HTML(b.String()) //nolint:gosec // built from numbers
}

func percentile(sorted []float64, q float64) float64 {
	return sorted[int(q*float64(len(sorted)-1)+0.5)]
}

// format prints a number the way a reader wants it: integers whole,
// others with up to two decimals.
func format(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"bars": barsSVG, "strip": stripSVG, "line": lineSVG, "format": format,
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Flotilla benchmarks</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td{padding:2px 10px;border-bottom:1px solid #eee}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.l,.v{font-size:11px;fill:#333}.bar{fill:#4a7bd0}.dot{fill:#d0574a}.line{fill:none;stroke:#4a7bd0;stroke-width:2}
.axis{stroke:#999}.mark{stroke:#222;stroke-dasharray:3 2}
nav a{margin-right:1em}
</style></head><body>
<h1>Flotilla benchmarks</h1>
<p>Generated by <code>make bench-report</code> from <code>bench/out/*.json</code> (<code>make bench</code>).</p>
<nav>{{range .}}<a href="#{{.Name}}">{{.Name}}</a>{{end}}</nav>
{{range .}}<section id="{{.Name}}"><h2>{{.Name}}</h2>
{{if .Curves}}<h3>Cost curve</h3>{{range .Curves}}<figure><figcaption>{{.Metric}} by clusters</figcaption>{{line .}}</figure>{{end}}{{end}}
{{if .Latencies}}<h3>Latencies (ms)</h3>{{bars .Latencies}}{{end}}
{{range .Samples}}<h3>{{.Key}} ({{len .Values}} samples)</h3>{{strip .}}{{end}}
<h3>All numbers</h3><table>{{range .Scalars}}<tr><td>{{.Key}}</td><td class="n">{{format .Value}}</td></tr>{{end}}</table>
</section>{{end}}
</body></html>
`))

func render(w io.Writer, benches []bench) error { return page.Execute(w, benches) }
