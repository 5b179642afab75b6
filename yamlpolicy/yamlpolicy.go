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
	"math"
	"regexp"
	"strconv"
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
	var docs []doc
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
	all := make([]retryhttp.Policy, len(docs))
	for i, d := range docs {
		all[i] = d.p
	}
	ps, err := retryhttp.NewPolicies(all...)
	if err != nil {
		// An error of the grouping (a dependency written twice without a
		// match, an operation that changes the Transport's settings) says
		// the index of the policy it is about: say its line instead.
		msg := strings.TrimPrefix(err.Error(), "retryhttp: ")
		if m := atIndex.FindStringSubmatchIndex(msg); m != nil {
			i, _ := strconv.Atoi(msg[m[2]:m[3]])
			if i >= 0 && i < len(docs) {
				return nil, fmt.Errorf("yamlpolicy: the policy at line %d: %s", docs[i].line, msg[:m[0]])
			}
		}
		return nil, fmt.Errorf("yamlpolicy: %s", msg)
	}
	return ps, nil
}

// atIndex finds the index NewPolicies names in an error.
var atIndex = regexp.MustCompile(` \(the policy at index ([0-9]+) of those given\)$`)

// doc is one policy of a file, and the line it starts on.
type doc struct {
	p    retryhttp.Policy
	line int
}

// policies reads the policies of one document: a policy, a list of them,
// or a map of them (each a policy or a list) keyed by dependency.
func policies(n *yaml.Node) ([]doc, error) {
	switch {
	case n.Kind == yaml.SequenceNode:
		return list(n, "")
	case n.Kind == yaml.MappingNode && isPolicy(n):
		p, err := policy(n, "")
		return []doc{{p, n.Line}}, err
	case n.Kind == yaml.MappingNode:
		var out []doc
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
			out = append(out, doc{p, v.Line})
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

func list(n *yaml.Node, key string) ([]doc, error) {
	var out []doc
	for _, item := range n.Content {
		p, err := policy(item, key)
		if err != nil {
			return nil, err
		}
		out = append(out, doc{p, item.Line})
	}
	return out, nil
}

// policy decodes one policy through retryhttp's own strict decoding, so
// that YAML and JSON files follow one set of rules; an error names the
// line of the field it is about.
func policy(n *yaml.Node, key string) (retryhttp.Policy, error) {
	dep := key
	fail := func(err error) (retryhttp.Policy, error) {
		line, msg := n.Line, strings.TrimPrefix(err.Error(), "retryhttp: ")
		if m := lineOf.FindStringSubmatch(msg); m != nil { // value's own: it knows the line
			line, _ = strconv.Atoi(m[1])
			msg = msg[len(m[0]):]
		} else if m := fieldPath.FindStringSubmatch(msg); m != nil {
			if f := find(n, strings.Split(m[1], ".")); f != nil {
				line = f.Line
			}
		}
		if dep != "" {
			return retryhttp.Policy{}, fmt.Errorf("yamlpolicy: policy %q, line %d: %s", dep, line, msg)
		}
		return retryhttp.Policy{}, fmt.Errorf("yamlpolicy: the policy at line %d: %s", line, msg)
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias // a policy written as an alias of another
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
	if dep == "" {
		return fail(errors.New("field dependency: missing: name the dependency the policy is for"))
	}
	budget := maxNodes
	v, err := value(n, "", map[*yaml.Node]bool{}, &budget)
	if err != nil {
		return fail(err)
	}
	if m := v.(map[string]any); m["dependency"] == nil && key != "" {
		m["dependency"] = key
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

// maxNodes bounds the values a policy may expand to through aliases: a
// few kilobytes of YAML can otherwise stand for billions of them.
const maxNodes = 100_000

// value is n, found at path, as the JSON value it stands for. A scalar
// keeps its text unless YAML types it a number, a boolean or null: a date
// stays the string it was written as, not a timestamp. A number is
// written as JSON would have it (3.0 stays 3.0, which a whole-number field
// refuses, as in JSON). Aliases are followed, but not in a cycle, and
// not past maxNodes values in all.
func value(n *yaml.Node, path string, expanding map[*yaml.Node]bool, budget *int) (any, error) {
	if *budget--; *budget < 0 {
		return nil, fmt.Errorf("line %d: the policy expands to more than %d values", n.Line, maxNodes)
	}
	at := func(format string, args ...any) error {
		return fmt.Errorf("line %d: field %s: %s", n.Line, path, fmt.Sprintf(format, args...))
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil || expanding[n.Alias] {
			return nil, at("an alias of itself")
		}
		expanding[n.Alias] = true
		defer delete(expanding, n.Alias)
		return value(n.Alias, path, expanding, budget)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			full := k
			if path != "" {
				full = path + "." + k
			}
			switch _, dup := m[k]; {
			case k == "<<":
				return nil, fmt.Errorf("line %d: field %s: merge keys are not read: write the fields", n.Content[i].Line, full)
			case dup:
				return nil, fmt.Errorf("line %d: field %s: written twice", n.Content[i].Line, full)
			}
			v, err := value(n.Content[i+1], full, expanding, budget)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := value(c, path, expanding, budget)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		if jsonNumber.MatchString(n.Value) {
			return json.Number(n.Value), nil
		}
		if leadingZero.MatchString(n.Value) {
			return nil, at("%s is not a number JSON reads (an octal in YAML 1.1): write it without the leading zero", n.Value)
		}
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, at("%s is not a finite number", n.Value)
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, at("%v", err)
		}
		return v, nil // 0x10, 1_000: YAML's, read as the numbers they are
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, at("%v", err)
		}
		return b, nil
	case "!!null":
		return nil, nil
	}
	return n.Value, nil
}

var (
	jsonNumber  = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
	leadingZero = regexp.MustCompile(`^[-+]?0[0-9]`)
)

// lineOf finds the line that an error of value's starts with.
var lineOf = regexp.MustCompile(`^line ([0-9]+): `)

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
