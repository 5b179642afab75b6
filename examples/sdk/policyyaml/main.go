// Command policyyaml reads retry policies written per dependency in YAML,
// with the same struct as the JSON form (retryhttp.Policy), and prints the
// Transport each dependency gets. YAML needs a module that the library
// does not require, so this example lives in the examples/sdk module.
//
//	cd examples/sdk && go run ./policyyaml policyyaml/policies.yaml
package main

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"os"
	"sort"

	"github.com/retryhttp/retryhttp"
	"sigs.k8s.io/yaml"
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

// load reads a YAML file of policies: YAML to JSON, then the library's
// own loader, which refuses unknown fields and names the field at fault.
func load(file string) (retryhttp.Policies, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return retryhttp.LoadPolicies(bytes.NewReader(js))
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
		fmt.Fprintf(w, "%s: %d attempts, %s from %v to %v\n", name, p.MaxAttemptsTotal, p.Backoff,
			p.InitialDelay, p.MaxDelay)
	}
	return nil
}
