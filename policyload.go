// This file reads policies (policy.go) from JSON: one document, a
// list of them, or an object of them keyed by dependency; it groups the
// operations of each dependency and makes one Transport per dependency.

package retryhttp

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"

	"github.com/retryhttp/retryhttp/internal/strictjson"
)

// ParsePolicy decodes one Policy from JSON. Keys are matched exactly, and
// a key that is not a field of the policy (with the field meant, if it is
// near one), a key written twice, a value of the wrong type and data after
// the value are errors that name the field; the values themselves are
// checked by Options.
func ParsePolicy(data []byte) (Policy, error) {
	var d policyDoc
	if err := policySchema.Check(data); err != nil {
		return Policy{}, err
	}
	if err := policySchema.Decode(data, &d); err != nil {
		return Policy{}, err
	}
	return Policy{doc: d}, nil
}

// Policies are retry policies keyed by the name of the dependency they
// apply to, each with its operations.
type Policies map[string]Policy

// LoadPolicies reads policies written in JSON, in any of three forms:
//
//   - one policy, as the template is written ({"dependency": "party-service", ...});
//   - a list of them ([{"dependency": ...}, {"dependency": ...}]);
//   - an object keyed by dependency name, each value a policy or a list of
//     the policies of its operations ({"party-service": {...}}), where
//     "dependency" may be left out.
//
// Policies of one dependency are its operations (see NewPolicies). Every
// policy is checked: an error names the dependency, the field and, for a
// syntax error, the line and column. Unknown fields, values of the wrong
// type, a dependency written twice and data after the value are errors.
func LoadPolicies(r io.Reader) (Policies, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("retryhttp: reading policies: %w", err)
	}
	if len(data) > maxPolicyBytes {
		return nil, fmt.Errorf("retryhttp: policies: longer than %d MiB: not read", maxPolicyBytes>>20)
	}
	docs, err := policySchema.Documents(data)
	if err != nil {
		return nil, fmt.Errorf("retryhttp: policies: %w", err)
	}
	var ps []Policy
	for _, d := range docs {
		p, err := loadOne(d, data)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	grouped, at, err := group(ps)
	if err != nil {
		// An error of the grouping (a dependency written twice without a
		// match, an operation that changes the Transport's settings):
		// say where the policy it is about starts.
		return nil, fmt.Errorf("%w (the policy at %s)", err, strictjson.LineCol(data, docs[at].Start))
	}
	return grouped, nil
}

// loadOne reads the policy of document d, found in data, and checks it:
// an error names its dependency and says where it is.
func loadOne(d strictjson.Document, data []byte) (Policy, error) {
	p, err := ParsePolicy(d.Raw)
	if err == nil {
		err = p.checkIn(d)
	}
	if err != nil {
		return Policy{}, placed(err, p, d, data)
	}
	return p, nil
}

// checkIn checks p, the policy of document d: its dependency, the key it
// is under, and its Options, whose error is located in d.
func (p *Policy) checkIn(d strictjson.Document) error {
	switch {
	case d.Key != "" && p.doc.Dependency == "":
		p.doc.Dependency = d.Key
	case d.Key != "" && p.doc.Dependency != d.Key:
		return fieldErr("dependency", "%q under the key %q", p.doc.Dependency, d.Key)
	}
	if p.doc.Dependency == "" {
		return fieldErr("dependency", "missing: name the dependency the policy is for")
	}
	_, err := p.Options() // the error names the field
	var fe *strictjson.FieldError
	if errors.As(err, &fe) && fe.At < 0 {
		fe.At = strictjson.KeyOffset(d.Raw, fe.Field)
	}
	return err
}

// placed is err, about policy p of document d in data, with the policy's
// dependency, and where in data it is: at its field, or where the policy
// starts.
func placed(err error, p Policy, d strictjson.Document, data []byte) error {
	var fe *strictjson.FieldError
	if !errors.As(err, &fe) || fe.At < 0 {
		err = fmt.Errorf("%w (the policy starts at %s)", err, strictjson.LineCol(data, d.Start))
	}
	if name := cmp.Or(p.doc.Dependency, d.Key, dependencyOf(d.Raw)); name != "" {
		return fmt.Errorf("retryhttp: policy %q: %w", name, strictjson.Located(err, data, d.Start))
	}
	return fmt.Errorf("retryhttp: a policy without a dependency: %w", strictjson.Located(err, data, d.Start))
}

// NewPolicies groups policies (from ParsePolicy, each of one dependency)
// by dependency. The policies of one dependency are its operations: the
// one without a match (at most one) is the dependency's, for every
// request that no operation matches; the others are its operations, tried
// in the order given. Operations may repeat what the dependency says of
// the Transport as a whole (budget, breaker, hedging, observability,
// time_budget.connect_timeout_ms, retry.body_buffer_limit_bytes,
// retry.address_rotation) but not change it. NewPolicies checks every
// policy; the error names the dependency, the field and, when several
// policies are given, the index of the one it is about.
func NewPolicies(docs ...Policy) (Policies, error) {
	ps, at, err := group(docs)
	if err != nil && len(docs) > 1 {
		return nil, fmt.Errorf("%w (the policy at index %d of those given)", err, at)
	}
	return ps, err
}

// group is NewPolicies, and the index of the policy an error is about.
func group(docs []Policy) (Policies, int, error) {
	g := grouping{ps: Policies{}, own: map[string]int{}, ops: map[string][]int{}}
	for i, p := range docs {
		if err := g.add(i, p); err != nil {
			return nil, i, err
		}
	}
	for _, name := range sortedKeys(g.ps) {
		if at, err := g.check(name); err != nil {
			return nil, at, err
		}
	}
	return g.ps, -1, nil
}

// grouping is the policies given to group, grouped so far by dependency.
type grouping struct {
	ps  Policies
	own map[string]int   // the index of the dependency's own policy, without a match
	ops map[string][]int // the indexes of its operations
}

// add groups p, the policy at index i: the dependency's own, or one of
// its operations.
func (g *grouping) add(i int, p Policy) error {
	d := p.doc
	if d.Dependency == "" {
		return errors.New("retryhttp: a policy has no dependency: name the dependency it is for")
	}
	if len(p.ops) > 0 {
		return fmt.Errorf("retryhttp: policy %q is already grouped with its operations: give each policy once", d.Dependency)
	}
	q := g.ps[d.Dependency]
	_, hasOwn := g.own[d.Dependency]
	switch {
	case d.Match != "":
		q.doc.Dependency = d.Dependency
		q.ops = append(q.ops, d)
		g.ops[d.Dependency] = append(g.ops[d.Dependency], i)
	case hasOwn:
		return fmt.Errorf("retryhttp: dependency %q is written twice without a match: give each of its operations a match (\"GET /parties/*\")", d.Dependency)
	default:
		g.own[d.Dependency] = i
		q.doc = d
	}
	g.ps[d.Dependency] = q
	return nil
}

// check checks the policies of dependency name, and says the index of the
// one an error is about.
func (g *grouping) check(name string) (int, error) {
	p := g.ps[name]
	at, hasOwn := g.own[name]
	if !hasOwn {
		// Operations alone: what applies to the Transport as a whole
		// is what the first of them that says it says.
		at = g.ops[name][0]
		for j, op := range p.ops {
			if op.transportKey() != "" {
				p.doc, at = op.transportPart(), g.ops[name][j]
				break
			}
		}
		g.ps[name] = p
	}
	if _, err := p.Options(); err != nil {
		var oe *opError
		if errors.As(err, &oe) {
			at = g.ops[name][oe.index]
		}
		return at, fmt.Errorf("retryhttp: policy %q: %w", name, err)
	}
	return -1, nil
}

// dependencyOf is the dependency a policy that does not parse names, if
// it can be read, so that its error can name it.
func dependencyOf(raw []byte) string {
	var named struct {
		Dependency string `json:"dependency"`
	}
	json.Unmarshal(raw, &named) // a partial result is what is wanted
	return named.Dependency
}

// Transports makes one Transport per dependency over base, named after it
// (WithName) unless its observability.tag_dependency is false, with opts
// first and the dependency's Policy after them, so that the policy wins
// where both set something.
func (ps Policies) Transports(base http.RoundTripper, opts ...Option) (map[string]*Transport, error) {
	out := make(map[string]*Transport, len(ps))
	for _, name := range sortedKeys(ps) {
		p := ps[name]
		popts, err := p.Options()
		if err != nil {
			return nil, fmt.Errorf("retryhttp: policy %q: %w", name, err)
		}
		all := append([]Option(nil), opts...)
		if ob := p.doc.Observability; ob == nil || ob.TagDependency == nil || *ob.TagDependency {
			all = append(all, WithName(name))
		}
		c, err := newConfig(base, append(all, popts...))
		if err != nil {
			return nil, fmt.Errorf("retryhttp: policy %q: %w", name, err)
		}
		out[name] = &Transport{c: c}
	}
	return out, nil
}

// policySchema is what a policy's JSON must be.
var policySchema = strictjson.Schema{Root: reflect.TypeFor[policyDoc](), Noun: "policy", Plural: "policies", KeyNoun: "dependency"}

// maxPolicyBytes is what LoadPolicies reads at most.
const maxPolicyBytes = 16 << 20

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
