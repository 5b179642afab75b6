// Package yamlpolicy reads retryhttp policies written in YAML: the
// per-dependency template as teams write it, one document per dependency
// (several documents in one file, separated by ---), a list of them, or a
// map of them keyed by dependency. It is a module of its own so that the
// retryhttp module needs no YAML library.
//
// Each policy is checked by retryhttp itself, with the same rules as
// retryhttp.LoadPolicies: unknown fields, values of the wrong type, a
// dependency written twice and invalid values are errors that name the
// line, the dependency and the field.
package yamlpolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/retryhttp/retryhttp"
	"gopkg.in/yaml.v3"
)

// maxSize bounds what Load reads, as retryhttp.LoadPolicies does.
const maxSize = 16 << 20

// Load reads the YAML policies of r and groups them by dependency
// (retryhttp.NewPolicies).
func Load(r io.Reader) (retryhttp.Policies, error) {
	dec := yaml.NewDecoder(io.LimitReader(r, maxSize))
	var docs []retryhttp.Policy
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("yamlpolicy: %w", err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		ps, err := policies(doc.Content[0])
		if err != nil {
			return nil, err
		}
		docs = append(docs, ps...)
	}
	if len(docs) == 0 {
		return nil, errors.New("yamlpolicy: no policy")
	}
	ps, err := retryhttp.NewPolicies(docs...)
	if err != nil {
		return nil, fmt.Errorf("yamlpolicy: %w", err)
	}
	return ps, nil
}

// policies reads the policies of one document: a policy, a list of them,
// or a map of them (each a policy or a list) keyed by dependency.
func policies(n *yaml.Node) ([]retryhttp.Policy, error) {
	switch {
	case n.Kind == yaml.SequenceNode:
		return list(n, "")
	case n.Kind == yaml.MappingNode && isPolicy(n):
		p, err := policy(n, "")
		return []retryhttp.Policy{p}, err
	case n.Kind == yaml.MappingNode:
		var out []retryhttp.Policy
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, v := n.Content[i].Value, n.Content[i+1]
			if seen[key] {
				return nil, fmt.Errorf("yamlpolicy: line %d: dependency %q is written twice", n.Content[i].Line, key)
			}
			seen[key] = true
			if v.Kind == yaml.SequenceNode {
				ps, err := list(v, key)
				if err != nil {
					return nil, err
				}
				out = append(out, ps...)
				continue
			}
			p, err := policy(v, key)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		return out, nil
	}
	return nil, fmt.Errorf("yamlpolicy: line %d: want a policy, a list of policies or a map of them keyed by dependency", n.Line)
}

// isPolicy reports whether a mapping is one policy, as retryhttp decides
// for JSON: one of its keys is a policy's field (a dependency's name
// never is).
func isPolicy(n *yaml.Node) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if policyKeys[n.Content[i].Value] {
			return true
		}
	}
	return false
}

// policyKeys are the keys of a policy's top level, as the template has
// them (TestPolicyKeys checks them against retryhttp).
var policyKeys = map[string]bool{
	"dependency": true, "operation": true, "match": true, "interaction_type": true, "criticality": true,
	"semantic_safety": true, "time_budget": true, "retry": true, "budget": true, "breaker": true,
	"hedging": true, "fallback": true, "observability": true, "owner": true,
}

func list(n *yaml.Node, key string) ([]retryhttp.Policy, error) {
	var out []retryhttp.Policy
	for _, item := range n.Content {
		p, err := policy(item, key)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// policy decodes one policy through retryhttp's own strict decoding, so
// that YAML and JSON files follow one set of rules; an error names the
// line of the field it is about.
func policy(n *yaml.Node, key string) (retryhttp.Policy, error) {
	dep := key
	fail := func(err error) (retryhttp.Policy, error) {
		line := n.Line
		if m := fieldPath.FindStringSubmatch(err.Error()); m != nil {
			if f := find(n, strings.Split(m[1], ".")); f != nil {
				line = f.Line
			}
		}
		msg := strings.TrimPrefix(err.Error(), "retryhttp: ")
		if dep != "" {
			return retryhttp.Policy{}, fmt.Errorf("yamlpolicy: policy %q, line %d: %s", dep, line, msg)
		}
		return retryhttp.Policy{}, fmt.Errorf("yamlpolicy: the policy at line %d: %s", line, msg)
	}
	if n.Kind != yaml.MappingNode {
		return fail(errors.New("a policy must be a mapping"))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if d := n.Content[i+1]; n.Content[i].Value == "dependency" && d.Kind == yaml.ScalarNode {
			if key != "" && d.Value != key {
				return fail(fmt.Errorf("field dependency: %q under the key %q", d.Value, key))
			}
			dep = d.Value
		}
	}
	var v map[string]any
	if err := n.Decode(&v); err != nil {
		return fail(err)
	}
	if _, ok := v["dependency"]; !ok && key != "" {
		v["dependency"] = key
	}
	if dep == "" {
		return fail(errors.New("field dependency: missing: name the dependency the policy is for"))
	}
	js, err := json.Marshal(v)
	if err != nil {
		return fail(fmt.Errorf("not a policy: %w", err))
	}
	p, err := retryhttp.ParsePolicy(js)
	if err != nil {
		return fail(err)
	}
	if _, err := p.Options(); err != nil {
		return fail(err)
	}
	return p, nil
}

// fieldPath finds the field an error of retryhttp's is about.
var fieldPath = regexp.MustCompile(`field ([A-Za-z0-9_.]+): `)

// find is the key node of the field at path in the mapping n, or nil.
func find(n *yaml.Node, path []string) *yaml.Node {
	var key *yaml.Node
	for _, k := range path {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		m := n
		key, n = nil, nil
		for i := 0; i+1 < len(m.Content); i += 2 {
			if m.Content[i].Value == k {
				key, n = m.Content[i], m.Content[i+1]
				break
			}
		}
		if key == nil {
			return nil
		}
	}
	return key
}
