// This file holds the storm's chart: the attempts the server received
// per 100 ms, one line per contender, and the outage as a band.

package main

import (
	"image/color"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
}

// drawChart draws the attempts per 100 ms of each contender over time.
func drawChart(path string, sc Scenario, rs []Result) error {
	p := plot.New()
	p.Title.Text = sc.Name + ": attempts the server received per 100 ms"
	p.X.Label.Text = "time (s)"
	p.Y.Label.Text = "attempts / 100 ms"
	p.Legend.Top = true
	outage := plotter.XYs{}
	from, to := time.Duration(0), sc.Outage
	if sc.Shape == "steady" {
		from, to = sc.Warmup, sc.Warmup+sc.Outage
	}
	for i, r := range rs {
		pts := make(plotter.XYs, len(r.Series))
		for j, v := range r.Series {
			pts[j].X = (time.Duration(j) * bucket).Seconds()
			pts[j].Y = float64(v)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(r.Contender, l)
	}
	outage = append(outage, plotter.XY{X: from.Seconds(), Y: 0}, plotter.XY{X: to.Seconds(), Y: 0})
	band, err := plotter.NewLine(outage)
	if err != nil {
		return err
	}
	band.Color = color.Black
	band.Width = vg.Points(4)
	band.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(band)
	p.Legend.Add("outage", band)
	p.Legend.ThumbnailWidth = vg.Points(20)
	return p.Save(11*vg.Inch, 5*vg.Inch, path)
}
