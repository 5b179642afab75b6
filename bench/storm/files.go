// This file holds what the storm writes to its -out folder, per
// scenario: the attempts per 100 ms of each contender (CSV, and the chart
// drawn from them, which -replot redraws from the CSV) and the summary of
// each contender's figures (CSV).

package main

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// writeFiles writes the scenario's files into dir: the series (CSV), the
// summary (CSV) and the chart (PNG).
func writeFiles(dir string, sc Scenario, rs []Result) error {
	if err := writeCSV(filepath.Join(dir, sc.Name+".csv"), rs); err != nil {
		return err
	}
	if err := writeSummary(filepath.Join(dir, sc.Name+"-summary.csv"), rs); err != nil {
		return err
	}
	return drawChart(filepath.Join(dir, sc.Name+".png"), sc, rs)
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

// writeSummary writes a scenario's figures per contender, one row each:
// the requests and attempts, the success of all requests, of those
// started in the outage and in the 2 s after it, the 503s the server
// shed after it, and, last (0 but in a mixed scenario), the critical and
// the sheddable requests and their successes.
func writeSummary(path string, rs []Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	w.Write([]string{"contender", "requests", "attempts", "successes", "outage_requests", "outage_successes",
		"after2s_requests", "after2s_successes", "after2s_success_pct", "shed_after", "first_ok_ms",
		"critical_requests", "critical_successes", "sheddable_requests", "sheddable_successes"})
	for _, r := range rs {
		w.Write([]string{r.Contender, strconv.Itoa(r.Requests), itoa(r.Attempts), strconv.Itoa(r.Successes),
			strconv.Itoa(r.OutageRequests), strconv.Itoa(r.OutageSuccess), strconv.Itoa(r.AfterRequests),
			strconv.Itoa(r.AfterSuccess), strconv.FormatFloat(pct(r.AfterSuccess, r.AfterRequests), 'f', 1, 64),
			itoa(r.ShedAfter), itoa(max(r.FirstOK.Milliseconds(), -1)),
			strconv.Itoa(r.CriticalRequests), strconv.Itoa(r.CriticalSuccesses),
			strconv.Itoa(r.SheddableRequests), strconv.Itoa(r.SheddableSuccesses)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
