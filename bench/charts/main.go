// Command charts draws the charts of docs/performance.md and
// docs/conformance.md from the output of a run: go test benchmark output
// (the median of each benchmark's ns/op) and the conformance table that
// the suite writes (the requests go-httpbin received). It runs nothing
// itself, so that a chart always shows what a run measured.
//
//	cd bench && go run ./charts -bench ../docs/data/overhead.txt -out ../docs/performance.png
//	cd bench && go run ./charts -conformance ../conformance/results.md -out ../docs/conformance.png
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"log"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func main() {
	bench := flag.String("bench", "", "go test -bench output to chart (median ns/op of each benchmark)")
	conf := flag.String("conformance", "", "conformance results.md to chart (requests received)")
	out := flag.String("out", "", "the PNG to write")
	flag.Parse()
	var err error
	switch {
	case *out == "":
		err = errors.New("-out is required")
	case *bench != "":
		err = benchChart(*bench, *out)
	case *conf != "":
		err = conformanceChart(*conf, *out)
	default:
		err = errors.New("give -bench or -conformance")
	}
	if err != nil {
		log.Fatal(err)
	}
}

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op`)

// medians reads go test benchmark output: the median ns/op of each
// benchmark, in the order they first appear.
func medians(file string) ([]string, map[string]float64, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var names []string
	runs := map[string][]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, nil, err
		}
		if runs[m[1]] == nil {
			names = append(names, m[1])
		}
		runs[m[1]] = append(runs[m[1]], v)
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("%s: no benchmark lines", file)
	}
	med := map[string]float64{}
	for n, vs := range runs {
		slices.Sort(vs)
		med[n] = vs[len(vs)/2]
	}
	return names, med, sc.Err()
}

func benchChart(file, out string) error {
	names, med, err := medians(file)
	if err != nil {
		return err
	}
	p := plot.New()
	p.Title.Text = "What retryhttp costs a GET that succeeds: ns per request over an in-memory base (median)"
	p.Y.Label.Text = "ns/op"
	vals := make(plotter.Values, len(names))
	labels := make([]string, len(names))
	for i, n := range names {
		vals[i] = med[n]
		labels[i] = strings.TrimPrefix(n[strings.LastIndex(n, "/")+1:], "rt=")
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(28))
	if err != nil {
		return err
	}
	bars.Color = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	p.Add(bars)
	p.NominalX(labels...)
	return p.Save(11*vg.Inch, 4*vg.Inch, out)
}

var received = regexp.MustCompile(`; (\d+) sent, (\d+) received`)

// conformanceChart draws, for each fault of the HTTP/1.1 table, the
// requests the server received of each kind of request.
func conformanceChart(file, out string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var kinds []string
	var faults []string
	var counts [][]float64 // per kind, per fault
	for line := range strings.Lines(string(data)) {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) < 3 {
			continue
		}
		if cells[0] == "protocol" {
			kinds = cells[2:]
			counts = make([][]float64, len(kinds))
			continue
		}
		if cells[0] != "HTTP/1.1" || len(cells)-2 != len(kinds) {
			continue
		}
		row := make([]float64, len(kinds))
		ok := true
		for i, c := range cells[2:] {
			m := received.FindStringSubmatch(c)
			if m == nil {
				ok = false // a row whose outcome is random states a range
				break
			}
			row[i], _ = strconv.ParseFloat(m[2], 64)
		}
		if !ok {
			continue
		}
		faults = append(faults, shorten(cells[1]))
		for i := range kinds {
			counts[i] = append(counts[i], row[i])
		}
	}
	if len(faults) == 0 {
		return fmt.Errorf("%s: no HTTP/1.1 rows", file)
	}
	palette := []color.Color{color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
		color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}}
	p := plot.New()
	p.Title.Text = "Requests go-httpbin received for one call, per fault (HTTP/1.1, behind toxiproxy)"
	p.Y.Label.Text = "requests received"
	p.Y.Max = 5.5 // room for the legend above the bars of 4
	p.Legend.Top = true
	w := vg.Points(9)
	for i, k := range kinds {
		bars, err := plotter.NewBarChart(plotter.Values(counts[i]), w)
		if err != nil {
			return err
		}
		bars.Color = palette[i%len(palette)]
		bars.Offset = w * vg.Length(float64(i)-float64(len(kinds)-1)/2)
		p.Add(bars)
		p.Legend.Add(k, bars)
	}
	p.NominalX(faults...)
	p.X.Tick.Label.Rotation = 0.35
	p.X.Tick.Label.XAlign = -0.9
	return p.Save(12*vg.Inch, 5*vg.Inch, out)
}

// shorten keeps a fault's name short enough for an axis.
func shorten(s string) string {
	s, _, _ = strings.Cut(s, " (")
	if len(s) > 28 {
		s = s[:28] + "…"
	}
	return s
}
