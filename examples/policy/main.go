// Command policy loads retry policies written per dependency as JSON (the
// template teams write: dependency, semantic_safety, time_budget, retry,
// budget, fallback, owner, ...) and makes one Transport per dependency,
// named after it in metrics and logs. It then calls each
// dependency's URL, given as NAME=URL arguments, and prints what came back.
//
//	go run ./examples/policy -policies examples/policy/policies.json shipping-rates=http://localhost:8080/rates
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strings"

	"github.com/retryhttp/retryhttp"
)

func main() {
	file := flag.String("policies", "examples/policy/policies.json", "JSON file of policies: one, a list, or an object keyed by dependency")
	flag.Parse()
	if err := run(os.Stdout, *file, flag.Args()); err != nil {
		log.Fatal(err)
	}
}

func run(w io.Writer, file string, calls []string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	policies, err := retryhttp.LoadPolicies(f)
	if err != nil {
		return err
	}
	transports, err := policies.Transports(nil)
	if err != nil {
		return err
	}
	clients := map[string]*http.Client{}
	for name, tr := range transports {
		clients[name] = &http.Client{Transport: tr}
	}

	names := make([]string, 0, len(clients))
	for name := range clients {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "dependencies: %s\n", strings.Join(names, ", "))
	for _, call := range calls {
		name, url, ok := strings.Cut(call, "=")
		client := clients[name]
		if !ok || client == nil {
			return fmt.Errorf("%q: want NAME=URL with NAME one of %s", call, strings.Join(names, ", "))
		}
		resp, err := client.Get(url)
		if err != nil {
			fmt.Fprintf(w, "%s: %v\n", name, err)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Fprintf(w, "%s: %s\n", name, resp.Status)
	}
	return nil
}
