// Command metrics serves retryhttp's Prometheus metrics at /metrics with
// promhttp, on loopback, while it sends traffic through a Transport to an
// embedded flaky server; then it scrapes its own /metrics and prints the
// retryhttp lines.
//
//	go run ./examples/metrics          # print and exit
//	go run ./examples/metrics -serve   # then keep serving /metrics until interrupted
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retryhttp/retryhttp"
)

func main() {
	serve := flag.Bool("serve", false, "keep serving /metrics after the traffic, until interrupted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, 30, *serve); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer, requests int, serve bool) error {
	// A flaky upstream: every third request gets a 503.
	var n atomic.Int64
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 == 0 {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	})}
	upL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go upstream.Serve(upL)
	defer upstream.Close()

	reg := prometheus.NewRegistry()
	metrics := retryhttp.NewMetrics()
	reg.MustRegister(metrics)
	metricsSrv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	mL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go metricsSrv.Serve(mL)
	defer metricsSrv.Close()

	tr := retryhttp.New(nil,
		retryhttp.WithMetrics(metrics),
		retryhttp.WithName("upstream"),
		retryhttp.WithBackoff(retryhttp.FullJitter(5*time.Millisecond, 50*time.Millisecond)))
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for range requests {
		resp, err := client.Get("http://" + upL.Addr().String() + "/items")
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	metricsURL := "http://" + mL.Addr().String() + "/metrics"
	resp, err := http.Get(metricsURL)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	fmt.Fprintf(w, "scraped %s after %d requests:\n", metricsURL, requests)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "retryhttp_") && !strings.Contains(line, "_bucket{") && !strings.HasSuffix(line, " 0") {
			fmt.Fprintln(w, " ", line)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if serve {
		fmt.Fprintf(w, "serving %s until interrupted\n", metricsURL)
		<-ctx.Done()
	}
	return nil
}
