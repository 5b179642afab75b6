// Command hedge measures hedged requests against a tail: a loopback server
// answers in 5 ms, except 1% of requests (drawn independently) that take
// 500 ms; clients send 200 requests a second. It reports, per contender,
// the extra requests the server received and the latency percentiles, and
// the same with the server saturated (every request slow). It writes the
// tables to stdout and a chart of the percentiles.
//
//	cd bench && go run ./hedge -out results
package main

import (
	"context"
	"flag"
	"fmt"
	"image/color"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/retryhttp/retryhttp"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

type contender struct {
	name string
	new  func(base http.RoundTripper) http.RoundTripper
}

var contenders = []contender{
	{"no hedging (retryhttp defaults)", func(b http.RoundTripper) http.RoundTripper { return retryhttp.New(b) }},
	{"retryhttp WithHedging (p95)", func(b http.RoundTripper) http.RoundTripper {
		return retryhttp.New(b, retryhttp.WithHedging(retryhttp.HedgeConfig{}))
	}},
	{"failsafe-go HedgePolicy (p95)", func(b http.RoundTripper) http.RoundTripper {
		return failsafehttp.NewRoundTripper(b, hedgepolicy.NewWithDelayQuantile[*http.Response](0.95, 1000, 20))
	}},
}

type result struct {
	name                  string
	requests, attempts    int64
	p50, p99, p999, worst time.Duration
}

func main() {
	out := flag.String("out", "results", "folder for the chart")
	n := flag.Int("n", 10000, "requests per contender in the tail scenario")
	rate := flag.Int("rate", 200, "requests a second")
	flag.Parse()
	var all [][]result
	for _, sc := range []struct {
		name     string
		slowFrac float64
		n        int
	}{{"tail: 1% of requests take 500 ms", 0.01, *n}, {"saturated: every request takes 500 ms", 1, *n / 5}} {
		var rs []result
		for _, c := range contenders {
			r, err := run(c, sc.slowFrac, sc.n, *rate)
			if err != nil {
				log.Fatal(err)
			}
			log.Printf("%s, %s: %+v", sc.name, c.name, r)
			rs = append(rs, r)
		}
		fmt.Printf("\n%s, %d requests at %d/s\n\n", sc.name, sc.n, *rate)
		fmt.Println("| contender | extra requests | p50 | p99 | p99.9 | max |")
		fmt.Println("|---|---|---|---|---|---|")
		for _, r := range rs {
			fmt.Printf("| %s | %.1f%% | %v | %v | %v | %v |\n", r.name,
				100*float64(r.attempts-r.requests)/float64(r.requests), ms(r.p50), ms(r.p99), ms(r.p999), ms(r.worst))
		}
		all = append(all, rs)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	if err := chart(filepath.Join(*out, "hedge.png"), all[0]); err != nil {
		log.Fatal(err)
	}
}

func ms(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

func run(c contender, slowFrac float64, n, rate int) (result, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return result{}, err
	}
	var attempts atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		d := 5 * time.Millisecond
		if rand.Float64() < slowFrac {
			d = 500 * time.Millisecond
		}
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "ok")
	})}
	go srv.Serve(l)
	defer srv.Close()
	base := &http.Transport{MaxIdleConnsPerHost: 1000, IdleConnTimeout: 30 * time.Second}
	defer base.CloseIdleConnections()
	rt := c.new(base)
	url := "http://" + l.Addr().String() + "/"
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		if d := time.Duration(i)*time.Second/time.Duration(rate) - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			t0 := time.Now()
			resp, err := rt.RoundTrip(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			lat[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	time.Sleep(600 * time.Millisecond) // let cancelled copies land
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return result{c.name, int64(n), attempts.Load(), q(0.5), q(0.99), q(0.999), lat[len(lat)-1]}, nil
}

// chart draws each contender's latency percentiles, log scale.
func chart(path string, rs []result) error {
	p := plot.New()
	p.Title.Text = "hedging a 1% tail of 500 ms (200 requests/s): latency percentiles"
	p.Y.Label.Text = "latency (ms)"
	p.Legend.Top = true
	colors := []color.Color{color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}}
	w := vg.Points(18)
	for i, r := range rs {
		vals := plotter.Values{msf(r.p50), msf(r.p99), msf(r.p999)}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.Color = colors[i%len(colors)]
		bars.Offset = vg.Length(i-1) * w
		p.Add(bars)
		p.Legend.Add(r.name, bars)
	}
	p.NominalX("p50", "p99", "p99.9")
	return p.Save(8*vg.Inch, 4.5*vg.Inch, path)
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
