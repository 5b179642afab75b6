// Command policyyaml reads retry policies written per dependency in YAML
// with the yamlpolicy module (the same struct as the JSON form,
// retryhttp.Policy), and prints the Transport each dependency gets. YAML
// needs a module that the library does not require, so this example
// lives in the examples/sdk module.
//
//	cd examples/sdk && go run ./policyyaml policyyaml/policies.yaml
package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"sort"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/yamlpolicy"
)

func main() {
	file := "policyyaml/policies.yaml"
	if len(os.Args) > 1 {
		file = os.Args[1]
	}
	if err := run(os.Stdout, file); err != nil {
		log.Fatal(err)
	}
}

// load reads a YAML file of policies with yamlpolicy, which refuses
// unknown fields and names the line, the dependency and the field at
// fault.
func load(file string) (retryhttp.Policies, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ps, err := yamlpolicy.Load(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return ps, nil
}

func run(w io.Writer, file string) error {
	policies, err := load(file)
	if err != nil {
		return err
	}
	transports, err := policies.Transports(nil)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(transports))
	for name := range transports {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := policies[name]
		fmt.Fprintf(w, "%s: %d attempts, %s from %dms to %dms\n", name, p.Retry.MaxAttemptsTotal, p.Retry.Backoff,
			p.Retry.InitialDelayMS, p.Retry.MaxDelayMS)
	}
	return nil
}
