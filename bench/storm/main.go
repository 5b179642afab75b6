// Command storm reproduces a thundering herd: clients send a burst (or a
// steady stream) of GETs to a loopback server that answers 503 for D
// seconds, then serves a bounded capacity, and it reports, per retry
// library, what the server received. It writes the per-100 ms series of
// attempts to CSV and draws them as PNG charts.
//
//	cd bench && go run ./storm -runs 3 -out results
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func main() {
	var (
		runs      = flag.Int("runs", 3, "runs per contender and scenario; the table shows medians")
		only      = flag.String("scenarios", "", "comma-separated scenario names (default: all)")
		out       = flag.String("out", "results", "folder for the CSV and PNG files")
		n         = flag.Int("n", 500, "burst size")
		rate      = flag.Int("rate", 200, "steady arrivals a second")
		capacity  = flag.Int("capacity", 50, "requests served at once after the outage")
		work      = flag.Duration("work", 10*time.Millisecond, "time to serve one request")
		contended = flag.String("contenders", "", "comma-separated contender names (default: all)")
		replot    = flag.Bool("replot", false, "run nothing: redraw each scenario's PNG from its CSV in -out (after merging runs by hand)")
	)
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		log.Fatal(err)
	}
	base := Scenario{N: *n, Rate: *rate, Capacity: *capacity, Work: *work, Timeout: 30 * time.Second,
		Warmup: 5 * time.Second, Recovery: 5 * time.Second}
	scenarios := []Scenario{
		with(base, "burst-D3", "burst", 3*time.Second, false, ""),
		with(base, "burst-D1", "burst", time.Second, false, ""),
		with(base, "steady-D5", "steady", 5*time.Second, false, ""),
		with(base, "steady-D1", "steady", time.Second, false, ""),
		with(base, "burst-D3-per-process", "burst", 3*time.Second, true, ""),
		with(base, "burst-D3-per-process-retry-after", "burst", 3*time.Second, true, "3"),
		with(base, "burst-D3-per-process-retry-after-spread", "burst", 3*time.Second, true, "3-6"),
		fleet(base, 50),
		fleet(base, 500),
		lone(base, 2),
		lone(base, 10),
	}
	if *replot {
		for _, sc := range scenarios {
			if !selected(*only, sc.Name) {
				continue
			}
			if err := replotCSV(*out, sc); err != nil {
				log.Fatal(err)
			}
		}
		return
	}
	p := bench.CommonPolicy
	contenders := []bench.Contender{
		bench.RetryHTTP, bench.RetryHTTPFailFast, bench.RetryablehttpDefaults,
		bench.Retryablehttp(p), bench.Failsafe(p), bench.Naive,
	}
	for _, sc := range scenarios {
		if !selected(*only, sc.Name) {
			continue
		}
		var medians []Result
		for _, c := range contenders {
			if !selected(*contended, c.Name) {
				continue
			}
			var rs []Result
			for i := range *runs {
				r, err := Run(sc, c)
				if err != nil {
					log.Fatal(err)
				}
				log.Printf("%s %s run %d: %d attempts (%.2fx), %d/%d ok, outage %d/%d ok, %.1fs",
					sc.Name, c.Name, i+1, r.Attempts, r.Amplification(), r.Successes, r.Requests,
					r.OutageSuccess, r.OutageRequests, r.Elapsed.Seconds())
				rs = append(rs, r)
			}
			medians = append(medians, median(rs))
		}
		if len(medians) == 0 {
			continue
		}
		printTable(os.Stdout, sc, medians, *runs)
		if err := writeCSV(filepath.Join(*out, sc.Name+".csv"), medians); err != nil {
			log.Fatal(err)
		}
		if err := drawChart(filepath.Join(*out, sc.Name+".png"), sc, medians); err != nil {
			log.Fatal(err)
		}
	}
}

func with(s Scenario, name, shape string, d time.Duration, perProcess bool, retryAfter string) Scenario {
	s.Name, s.Shape, s.Outage, s.PerProcess, s.RetryAfter = name, shape, d, perProcess, retryAfter
	return s
}

// fleet is the headline scenario: a dependency down for 30 s, called by
// k instances, each with its own client, sharing the steady arrivals.
func fleet(s Scenario, k int) Scenario {
	s = with(s, fmt.Sprintf("fleet-D30-K%d", k), "steady", 30*time.Second, false, "")
	s.Instances = k
	return s
}

// lone is a client with little traffic of its own: rate requests a
// second (open loop), 5 s healthy, then a 3 s outage.
func lone(s Scenario, rate int) Scenario {
	s = with(s, fmt.Sprintf("lone-R%d-D3", rate), "steady", 3*time.Second, false, "")
	s.Rate = rate
	return s
}

func selected(list, name string) bool {
	if list == "" {
		return true
	}
	for _, s := range strings.Split(list, ",") {
		if strings.TrimSpace(s) == name {
			return true
		}
	}
	return false
}

// median takes the median of each figure over the runs, and the series of
// the run whose attempts are the median.
func median(rs []Result) Result {
	pick := func(f func(Result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	byAttempts := append([]Result(nil), rs...)
	sort.Slice(byAttempts, func(i, j int) bool { return byAttempts[i].Attempts < byAttempts[j].Attempts })
	m := byAttempts[len(byAttempts)/2]
	m.Successes = int(pick(func(r Result) float64 { return float64(r.Successes) }))
	m.OutageSuccess = int(pick(func(r Result) float64 { return float64(r.OutageSuccess) }))
	m.OutageAttempts = int64(pick(func(r Result) float64 { return float64(r.OutageAttempts) }))
	m.PeakOutage = int64(pick(func(r Result) float64 { return float64(r.PeakOutage) }))
	m.PeakRecovery = int64(pick(func(r Result) float64 { return float64(r.PeakRecovery) }))
	m.P50 = time.Duration(pick(func(r Result) float64 { return float64(r.P50) }))
	m.P99 = time.Duration(pick(func(r Result) float64 { return float64(r.P99) }))
	m.FailP99 = time.Duration(pick(func(r Result) float64 { return float64(r.FailP99) }))
	m.PeakAfter2s = int64(pick(func(r Result) float64 { return float64(r.PeakAfter2s) }))
	m.ShedAfter = int64(pick(func(r Result) float64 { return float64(r.ShedAfter) }))
	m.AfterRequests = int(pick(func(r Result) float64 { return float64(r.AfterRequests) }))
	m.AfterSuccess = int(pick(func(r Result) float64 { return float64(r.AfterSuccess) }))
	m.Elapsed = time.Duration(pick(func(r Result) float64 { return float64(r.Elapsed) }))
	return m
}

func printTable(w io.Writer, sc Scenario, rs []Result, runs int) {
	mode := "one shared client"
	if sc.PerProcess {
		mode = "one client per request (no shared state)"
	}
	ra := ""
	if sc.RetryAfter != "" {
		ra = ", Retry-After: " + sc.RetryAfter + " during the outage"
	}
	if sc.Instances > 1 {
		mode = fmt.Sprintf("a fleet of %d instances, each its own client, arrivals round-robin", sc.Instances)
	}
	if sc.Shape == "steady" {
		fmt.Fprintf(w, "\n%s: %d req/s, %v healthy, %v outage, %v recovery; capacity %d × %v; %s%s; medians of %d runs\n\n",
			sc.Name, sc.Rate, sc.Warmup, sc.Outage, sc.Recovery, sc.Capacity, sc.Work, mode, ra, runs)
		fmt.Fprintln(w, "| contender | requests | attempts | attempts in outage / requests started in it | peak /100ms outage | peak /100ms in 2 s after | 503s shed after | success (all) | success (started in outage) | success (started in 2 s after) | p50 | p99 | p99 time to fail |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, r := range rs {
			fmt.Fprintf(w, "| %s | %d | %d | %.2f× | %d | %d | %d | %.1f%% | %.1f%% | %.1f%% | %v | %v | %v |\n",
				r.Contender, r.Requests, r.Attempts, r.OutageAmplification(), r.PeakOutage, r.PeakAfter2s, r.ShedAfter,
				pct(r.Successes, r.Requests), pct(r.OutageSuccess, r.OutageRequests), pct(r.AfterSuccess, r.AfterRequests),
				round(r.P50), round(r.P99), round(r.FailP99))
		}
		return
	}
	fmt.Fprintf(w, "\n%s: %d GETs at t=0, %v outage; capacity %d × %v; %s%s; medians of %d runs\n\n",
		sc.Name, sc.N, sc.Outage, sc.Capacity, sc.Work, mode, ra, runs)
	fmt.Fprintln(w, "| contender | attempts | amplification | peak /100ms outage | peak /100ms after | success | p50 | p99 | done after |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %d | %.2f× | %d | %d | %.1f%% | %v | %v | %.1fs |\n",
			r.Contender, r.Attempts, r.Amplification(), r.PeakOutage, r.PeakRecovery,
			pct(r.Successes, r.Requests), round(r.P50), round(r.P99), r.Elapsed.Seconds())
	}
}

func pct(a, b int) float64 { return 100 * float64(a) / float64(max(b, 1)) }

func round(d time.Duration) time.Duration {
	if d == 0 {
		return 0
	}
	return d.Round(10 * time.Millisecond)
}

// replotCSV draws a scenario's chart from its CSV in dir, contenders in
// the order the file gives them.
func replotCSV(dir string, sc Scenario) error {
	f, err := os.Open(filepath.Join(dir, sc.Name+".csv"))
	if err != nil {
		return err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return err
	}
	var rs []Result
	for _, row := range rows[1:] {
		v, err := strconv.ParseInt(row[2], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.Name, err)
		}
		if len(rs) == 0 || rs[len(rs)-1].Contender != row[0] {
			rs = append(rs, Result{Contender: row[0]})
		}
		rs[len(rs)-1].Series = append(rs[len(rs)-1].Series, v)
	}
	return drawChart(filepath.Join(dir, sc.Name+".png"), sc, rs)
}

func writeCSV(path string, rs []Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"contender", "t_ms", "attempts"})
	for _, r := range rs {
		for i, v := range r.Series {
			w.Write([]string{r.Contender, itoa(int64(i) * int64(bucket/time.Millisecond)), itoa(v)})
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
