// This file reads policies (policy.go) from JSON: one document, a
// list of them, or an object of them keyed by dependency; it groups the
// operations of each dependency and makes one Transport per dependency.

package retryhttp

import (
	"bytes"
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
	docs, err := documents(data)
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
		return nil, fmt.Errorf("%w (the policy at %s)", err, strictjson.LineCol(data, docs[at].start))
	}
	return grouped, nil
}

// loadOne reads the policy of document d, found in data, and checks it:
// an error names its dependency and says where it is.
func loadOne(d document, data []byte) (Policy, error) {
	p, err := ParsePolicy(d.raw)
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
func (p *Policy) checkIn(d document) error {
	switch {
	case d.key != "" && p.doc.Dependency == "":
		p.doc.Dependency = d.key
	case d.key != "" && p.doc.Dependency != d.key:
		return fieldErr("dependency", "%q under the key %q", p.doc.Dependency, d.key)
	}
	if p.doc.Dependency == "" {
		return fieldErr("dependency", "missing: name the dependency the policy is for")
	}
	_, err := p.Options() // the error names the field
	var fe *strictjson.FieldError
	if errors.As(err, &fe) && fe.At < 0 {
		fe.At = strictjson.KeyOffset(d.raw, fe.Field)
	}
	return err
}

// placed is err, about policy p of document d in data, with the policy's
// dependency, and where in data it is: at its field, or where the policy
// starts.
func placed(err error, p Policy, d document, data []byte) error {
	var fe *strictjson.FieldError
	if !errors.As(err, &fe) || fe.At < 0 {
		err = fmt.Errorf("%w (the policy starts at %s)", err, strictjson.LineCol(data, d.start))
	}
	if name := cmp.Or(p.doc.Dependency, d.key, dependencyOf(d.raw)); name != "" {
		return fmt.Errorf("retryhttp: policy %q: %w", name, strictjson.Located(err, data, d.start))
	}
	return fmt.Errorf("retryhttp: a policy without a dependency: %w", strictjson.Located(err, data, d.start))
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

// A document is one policy's JSON in a file: its key in an object of
// dependencies ("" in a list or alone), and where it starts.
type document struct {
	key   string
	raw   json.RawMessage
	start int64
}

// documents splits a policies file into its policies. A dependency keyed
// twice, or data after the value, is an error.
func documents(data []byte) ([]document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, strictjson.Located(err, data, 0)
	}
	var docs []document
	switch tok {
	case json.Delim('['):
		docs, err = list(dec, data, "")
	case json.Delim('{'):
		// An object with a key that is a policy's field is one policy
		// (whose dependency may be missing), not dependencies by name.
		if isPolicy(data) {
			return []document{{raw: bytes.TrimSpace(data), start: strictjson.OffsetOf(data, 0)}}, trailing(dec, data, true)
		}
		docs, err = keyed(dec, data)
	default:
		return nil, errors.New("want a policy, a list of policies or an object of them keyed by dependency")
	}
	if err != nil {
		return nil, err
	}
	return docs, trailing(dec, data, false)
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

// isPolicy reports whether the object in data has a policy's field among
// its keys, read in order up to the first value that does not parse.
func isPolicy(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if _, ok := policyKeys[tok.(string)]; ok {
			return true
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return false
		}
	}
	return false
}

// keyed reads an object of dependencies, after its '{'.
func keyed(dec *json.Decoder, data []byte) ([]document, error) {
	var docs []document
	seen := map[string]bool{}
	for dec.More() {
		keyAt := strictjson.OffsetOf(data, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil, strictjson.Located(err, data, 0)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, fmt.Errorf("%s: dependency %q is written twice", strictjson.LineCol(data, dec.InputOffset()), name)
		}
		seen[name] = true
		ds, err := keyedValue(dec, data, name, keyAt)
		if err != nil {
			return nil, err
		}
		docs = append(docs, ds...)
	}
	_, err := dec.Token() // '}'
	return docs, strictjson.Located(err, data, 0)
}

// keyedValue reads the policies of dependency name, its key at keyAt: a
// list of its operations' policies, or one.
func keyedValue(dec *json.Decoder, data []byte, name string, keyAt int64) ([]document, error) {
	start := strictjson.OffsetOf(data, dec.InputOffset())
	if start < int64(len(data)) && data[start] == '[' {
		if _, err := dec.Token(); err != nil {
			return nil, strictjson.Located(err, data, 0)
		}
		ops, err := list(dec, data, name)
		if err != nil {
			return nil, fmt.Errorf("dependency %q: %w", name, err)
		}
		return ops, nil
	}
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("dependency %q: %w", name, strictjson.Located(err, data, start))
	}
	if hint := policySchema.DidYouMean(name, ""); len(v) > 0 && v[0] != '{' && hint != "" {
		// A scalar where a policy should be, under a key a letter
		// or two from a field: one policy with a typo in its key,
		// not an object of policies.
		return nil, strictjson.Located(&strictjson.FieldError{Field: strictjson.Quoted(name), Msg: "not a field of the policy" + hint, At: keyAt}, data, 0)
	}
	return []document{{name, v, start}}, nil
}

// list reads the policies of a list, after its '['.
func list(dec *json.Decoder, data []byte, key string) ([]document, error) {
	var docs []document
	for dec.More() {
		start := strictjson.OffsetOf(data, dec.InputOffset())
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, strictjson.Located(err, data, start)
		}
		docs = append(docs, document{key, v, start})
	}
	_, err := dec.Token() // ']'
	return docs, strictjson.Located(err, data, 0)
}

// trailing reports data after the value that dec has read, or, if whole,
// reads the value first.
func trailing(dec *json.Decoder, data []byte, whole bool) error {
	if whole {
		var v json.RawMessage
		dec = json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&v); err != nil {
			return strictjson.Located(err, data, 0)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: data after the policies", strictjson.LineCol(data, dec.InputOffset()))
	}
	return nil
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
var policySchema = strictjson.Schema{Root: reflect.TypeFor[policyDoc](), Noun: "policy"}

// policyKeys are the keys of a policy's top level.
var policyKeys = strictjson.Fields(reflect.TypeFor[policyDoc]())

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
