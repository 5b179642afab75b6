// This file reads policies (policydata.go) from JSON: one document, a
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
	"sort"
)

// fieldError is an error about one field of a Policy.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return "field " + e.field + ": " + e.msg }

func fieldErr(field, format string, args ...any) error {
	return &fieldError{field, fmt.Sprintf(format, args...)}
}

// ParsePolicy decodes one Policy from JSON. Unknown fields, values of the
// wrong type and data after the value are errors; the values themselves
// are checked by Options.
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	err := decodeStrict(data, &p)
	var fe *fieldError
	if err == nil || errors.As(err, &fe) {
		return p, err
	}
	// A value that failed its own decoding (a duration, say) does not
	// name its field: find the field by decoding them one at a time.
	var raw map[string]json.RawMessage
	if json.Unmarshal(data, &raw) == nil {
		for _, k := range sortedKeys(raw) {
			one, _ := json.Marshal(map[string]json.RawMessage{k: raw[k]})
			var q Policy
			if e := decodeStrict(one, &q); e != nil && !errors.As(e, &fe) {
				return p, fieldErr(k, "%v", e)
			}
		}
	}
	return p, err
}

// Policies are retry policies keyed by the name of the dependency they
// apply to. A dependency's operations are in its Policy's Operations.
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
	data, err := io.ReadAll(io.LimitReader(r, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("retryhttp: reading policies: %w", err)
	}
	docs, err := documents(data)
	if err != nil {
		return nil, fmt.Errorf("retryhttp: policies: %w", err)
	}
	var ps []Policy
	for _, d := range docs {
		p, err := ParsePolicy(d.raw)
		if err == nil && d.key != "" {
			if p.Dependency == "" {
				p.Dependency = d.key
			} else if p.Dependency != d.key {
				err = fieldErr("dependency", "%q under the key %q", p.Dependency, d.key)
			}
		}
		if err == nil && p.Dependency == "" {
			err = fieldErr("dependency", "missing: name the dependency the policy is for")
		}
		if err == nil {
			_, err = p.Options() // the error names the field
		}
		if err != nil {
			if name := cmp.Or(p.Dependency, d.key); name != "" {
				return nil, fmt.Errorf("retryhttp: policy %q: %w (the policy starts at %s)",
					name, located(err, data, d.start), lineCol(data, d.start))
			}
			return nil, fmt.Errorf("retryhttp: the policy at %s: %w", lineCol(data, d.start), located(err, data, d.start))
		}
		ps = append(ps, p)
	}
	return NewPolicies(ps...)
}

// NewPolicies groups policies by dependency, with fields of the flat form
// moved into their sections (max_attempts_total into
// Retry.MaxAttemptsTotal, and so on). The policies of one
// dependency are its operations: the one without a Match (at most one) is
// the dependency's, for every request that no operation matches; the
// others are its Operations, tried in the order given. Operations may
// repeat what the dependency says of the Transport as a whole (budget,
// breaker, hedging, observability, time_budget.connect_timeout_ms,
// retry.body_buffer_limit_bytes) but not change it. NewPolicies checks every policy; the error names the
// dependency and the field.
func NewPolicies(docs ...Policy) (Policies, error) {
	ps := Policies{}
	own := map[string]bool{} // the dependency's own policy, without a match, was given
	for _, d := range docs {
		if d.Dependency == "" {
			return nil, errors.New("retryhttp: a policy has no dependency: name the dependency it is for")
		}
		if len(d.Operations) > 0 {
			return nil, fmt.Errorf("retryhttp: policy %q: Operations are filled by NewPolicies: give each operation as a policy of its own, with a match", d.Dependency)
		}
		d, _, err := d.normalized()
		if err != nil {
			return nil, fmt.Errorf("retryhttp: policy %q: %w", d.Dependency, err)
		}
		p := ps[d.Dependency]
		switch {
		case d.Match != "":
			p.Dependency = d.Dependency
			p.Operations = append(p.Operations, d)
		case own[d.Dependency]:
			return nil, fmt.Errorf("retryhttp: dependency %q is written twice without a match: give each of its operations a match (\"GET /parties/*\")", d.Dependency)
		default:
			own[d.Dependency] = true
			ops := p.Operations
			p = d
			p.Operations = ops
		}
		ps[d.Dependency] = p
	}
	for _, name := range sortedKeys(ps) {
		p := ps[name]
		if !own[name] {
			// Operations alone: what applies to the Transport as a whole
			// is what the first of them that says it says.
			for _, op := range p.Operations {
				if op.transportKey() != "" {
					t := op.transportPart()
					t.Operations = p.Operations
					p = t
					break
				}
			}
			ps[name] = p
		}
		if _, err := p.Options(); err != nil {
			return nil, fmt.Errorf("retryhttp: policy %q: %w", name, err)
		}
	}
	return ps, nil
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
		return nil, located(err, data, 0)
	}
	var docs []document
	switch tok {
	case json.Delim('['):
		docs, err = list(dec, data, "")
	case json.Delim('{'):
		var single struct {
			Dependency json.RawMessage `json:"dependency"`
		}
		if json.Unmarshal(data, &single) == nil && len(single.Dependency) > 0 && single.Dependency[0] == '"' {
			return []document{{raw: bytes.TrimSpace(data), start: offsetOf(data, 0)}}, trailing(dec, data, true)
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

// keyed reads an object of dependencies, after its '{'.
func keyed(dec *json.Decoder, data []byte) ([]document, error) {
	var docs []document
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, located(err, data, 0)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, fmt.Errorf("%s: dependency %q is written twice", lineCol(data, dec.InputOffset()), name)
		}
		seen[name] = true
		start := offsetOf(data, dec.InputOffset())
		if start < int64(len(data)) && data[start] == '[' {
			if _, err := dec.Token(); err != nil {
				return nil, located(err, data, 0)
			}
			ops, err := list(dec, data, name)
			if err != nil {
				return nil, fmt.Errorf("dependency %q: %w", name, err)
			}
			docs = append(docs, ops...)
			continue
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("dependency %q: %w", name, located(err, data, start))
		}
		docs = append(docs, document{name, v, start})
	}
	_, err := dec.Token() // '}'
	return docs, located(err, data, 0)
}

// list reads the policies of a list, after its '['.
func list(dec *json.Decoder, data []byte, key string) ([]document, error) {
	var docs []document
	for dec.More() {
		start := offsetOf(data, dec.InputOffset())
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, located(err, data, start)
		}
		docs = append(docs, document{key, v, start})
	}
	_, err := dec.Token() // ']'
	return docs, located(err, data, 0)
}

// trailing reports data after the value that dec has read, or, if whole,
// reads the value first.
func trailing(dec *json.Decoder, data []byte, whole bool) error {
	if whole {
		var v json.RawMessage
		dec = json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&v); err != nil {
			return located(err, data, 0)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: data after the policies", lineCol(data, dec.InputOffset()))
	}
	return nil
}

// offsetOf is the offset of the first byte at or after off that is not
// space or a separator.
func offsetOf(data []byte, off int64) int64 {
	return off + int64(len(data[off:])-len(bytes.TrimLeft(data[off:], " \t\r\n:,")))
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
		if ob := p.Observability; ob == nil || ob.TagDependency == nil || *ob.TagDependency {
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

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fieldErr(te.Field, "a JSON %s where %v is wanted", te.Value, te.Type)
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: data after the JSON value", lineCol(data, dec.InputOffset()))
	}
	return nil
}

// lineCol says where offset lies in data: "line 3, column 7".
func lineCol(data []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(data)))
	line := 1 + bytes.Count(data[:offset], []byte("\n"))
	col := offset - int64(bytes.LastIndexByte(data[:offset], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}

// located adds the line and column of a JSON syntax error in data, found
// at base + its offset.
func located(err error, data []byte, base int64) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%s: %w", lineCol(data, base+se.Offset), err)
	}
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
