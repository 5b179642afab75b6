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
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"
)

// fieldError is an error about one field of a Policy, found at offset at
// of its JSON (-1 if not known).
type fieldError struct {
	field, msg string
	at         int64
}

func (e *fieldError) Error() string { return "field " + e.field + ": " + e.msg }

func fieldErr(field, format string, args ...any) error {
	return &fieldError{field, fmt.Sprintf(format, args...), -1}
}

// ParsePolicy decodes one Policy from JSON. Keys are matched exactly, and
// a key that is not a field of the policy (with the field meant, if it is
// near one), a key written twice, a value of the wrong type and data after
// the value are errors that name the field; the values themselves are
// checked by Options.
func ParsePolicy(data []byte) (Policy, error) {
	var d policyDoc
	if err := checkKeys(data, reflect.TypeFor[policyDoc]()); err != nil {
		return Policy{}, err
	}
	if err := decodeStrict(data, &d); err != nil {
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
		p, err := ParsePolicy(d.raw)
		if err == nil && d.key != "" {
			if p.doc.Dependency == "" {
				p.doc.Dependency = d.key
			} else if p.doc.Dependency != d.key {
				err = fieldErr("dependency", "%q under the key %q", p.doc.Dependency, d.key)
			}
		}
		if err == nil && p.doc.Dependency == "" {
			err = fieldErr("dependency", "missing: name the dependency the policy is for")
		}
		if err == nil {
			_, err = p.Options() // the error names the field
			var fe *fieldError
			if errors.As(err, &fe) && fe.at < 0 {
				fe.at = keyOffset(d.raw, fe.field)
			}
		}
		if err != nil {
			var fe *fieldError
			if !errors.As(err, &fe) || fe.at < 0 {
				// Not located in the file: say where the policy is.
				err = fmt.Errorf("%w (the policy starts at %s)", err, lineCol(data, d.start))
			}
			if name := cmp.Or(p.doc.Dependency, d.key, dependencyOf(d.raw)); name != "" {
				return nil, fmt.Errorf("retryhttp: policy %q: %w", name, located(err, data, d.start))
			}
			return nil, fmt.Errorf("retryhttp: a policy without a dependency: %w", located(err, data, d.start))
		}
		ps = append(ps, p)
	}
	grouped, at, err := group(ps)
	if err != nil {
		// An error of the grouping (a dependency written twice without a
		// match, an operation that changes the Transport's settings):
		// say where the policy it is about starts.
		return nil, fmt.Errorf("%w (the policy at %s)", err, lineCol(data, docs[at].start))
	}
	return grouped, nil
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
	ps := Policies{}
	own := map[string]int{}   // the index of the dependency's own policy, without a match
	ops := map[string][]int{} // the indexes of its operations
	for i, p := range docs {
		d := p.doc
		if d.Dependency == "" {
			return nil, i, errors.New("retryhttp: a policy has no dependency: name the dependency it is for")
		}
		if len(p.ops) > 0 {
			return nil, i, fmt.Errorf("retryhttp: policy %q is already grouped with its operations: give each policy once", d.Dependency)
		}
		q := ps[d.Dependency]
		_, hasOwn := own[d.Dependency]
		switch {
		case d.Match != "":
			q.doc.Dependency = d.Dependency
			q.ops = append(q.ops, d)
			ops[d.Dependency] = append(ops[d.Dependency], i)
		case hasOwn:
			return nil, i, fmt.Errorf("retryhttp: dependency %q is written twice without a match: give each of its operations a match (\"GET /parties/*\")", d.Dependency)
		default:
			own[d.Dependency] = i
			q.doc = d
		}
		ps[d.Dependency] = q
	}
	for _, name := range sortedKeys(ps) {
		p := ps[name]
		at, hasOwn := own[name]
		if !hasOwn {
			// Operations alone: what applies to the Transport as a whole
			// is what the first of them that says it says.
			at = ops[name][0]
			for j, op := range p.ops {
				if op.transportKey() != "" {
					p.doc, at = op.transportPart(), ops[name][j]
					break
				}
			}
			ps[name] = p
		}
		if _, err := p.Options(); err != nil {
			var oe *opError
			if errors.As(err, &oe) {
				at = ops[name][oe.index]
			}
			return nil, at, fmt.Errorf("retryhttp: policy %q: %w", name, err)
		}
	}
	return ps, -1, nil
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
		// An object with a key that is a policy's field is one policy
		// (whose dependency may be missing), not dependencies by name.
		if isPolicy(data) {
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
		keyAt := offsetOf(data, dec.InputOffset())
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
		if hint := didYouMean(name, ""); len(v) > 0 && v[0] != '{' && hint != "" {
			// A scalar where a policy should be, under a key a letter
			// or two from a field: one policy with a typo in its key,
			// not an object of policies.
			return nil, located(&fieldError{quoted(name), "not a field of the policy" + hint, keyAt}, data, 0)
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

// decodeStrict decodes data, whose keys checkKeys has checked, into v.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &fieldError{te.Field, fmt.Sprintf("want %s, not %s", kindWords(te.Type), valueWords(te.Value)), keyOffset(data, te.Field)}
		}
		if errors.As(err, &te) {
			return fmt.Errorf("want a policy (a section of fields), not %s", valueWords(te.Value))
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: data after the policy", lineCol(data, dec.InputOffset()))
	}
	return nil
}

// kindWords says what a field of type t takes, in words that are neither
// JSON's nor Go's, so that a YAML file's errors read as well.
func kindWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list of " + strings.TrimPrefix(kindWords(t.Elem()), "a ") + "s"
	case reflect.Struct:
		return "a section of fields"
	}
	return t.String()
}

// valueWords names what a JSON value was, from UnmarshalTypeError.Value.
func valueWords(v string) string {
	switch {
	case v == "array":
		return "a list"
	case v == "object":
		return "a section"
	case v == "bool":
		return "true or false"
	case v == "number":
		return "a number"
	case strings.HasPrefix(v, "number "):
		return "the number " + strings.TrimPrefix(v, "number ")
	}
	return "a " + v
}

// policyKeys are the keys of a policy's top level.
var policyKeys = fieldsByKey(reflect.TypeFor[policyDoc]())

func fieldsByKey(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
			m[tag] = f.Type
		}
	}
	return m
}

// The policy reader's limits: what LoadPolicies reads at most, how deep
// values may nest (a policy nests 3 deep; a value nested past the limit
// is an error, not a stack that grows with the input), and how much of a
// key an error quotes.
const (
	maxPolicyBytes = 16 << 20
	maxPolicyDepth = 32
	maxQuotedKey   = 64
)

// checkKeys walks the JSON value in data along the schema type t: every
// key of an object must be one of its fields' names, exactly, and written
// once. Values are left to decodeStrict.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walkKeys(dec, data, t, "", 0)
}

func walkKeys(dec *json.Decoder, data []byte, t reflect.Type, path string, depth int) error {
	if depth > maxPolicyDepth {
		return &fieldError{quoted(path), fmt.Sprintf("nested deeper than %d", maxPolicyDepth), offsetOf(data, dec.InputOffset())}
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = fieldsByKey(t)
		}
		seen := map[string]bool{}
		for dec.More() {
			at := dec.InputOffset()
			ktok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := ktok.(string)
			at = offsetOf(data, at)
			full := key
			if path != "" {
				full = path + "." + key
			}
			ft, ok := fields[key]
			switch {
			case fields != nil && !ok:
				return &fieldError{quoted(full), "not a field of the policy" + didYouMean(key, path), at}
			case seen[key]:
				return &fieldError{quoted(full), "written twice", at}
			}
			seen[key] = true
			if err := walkKeys(dec, data, ft, full, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Slice {
			elem = t.Elem()
		}
		for dec.More() {
			if err := walkKeys(dec, data, elem, path, depth+1); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return nil
}

// keyOffset is where the key of the field at path is in data, or -1.
func keyOffset(data []byte, path string) int64 {
	dec := json.NewDecoder(bytes.NewReader(data))
	want := strings.Split(path, ".")
	depth := 0 // objects entered along want
	for {
		at := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return -1
		}
		switch tok {
		case json.Delim('{'):
			continue
		case json.Delim('}'):
			return -1
		}
		key, ok := tok.(string)
		if !ok {
			return -1
		}
		if key != want[depth] {
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				return -1
			}
			continue
		}
		if depth++; depth == len(want) {
			return offsetOf(data, at)
		}
	}
}

// didYouMean names the field that key, found under path, was probably
// meant to be: one a letter or two away, written in another case, or in
// another section of the policy.
func didYouMean(key, path string) string {
	if len(key) > maxQuotedKey {
		return "" // no field is near so long a key: not measured
	}
	best, bestDist := "", 3+len(key)/6 // 3 for a short key, 4 for "initial_delay"
	var visit func(prefix string, t reflect.Type)
	visit = func(prefix string, t reflect.Type) {
		for k, ft := range fieldsByKey(t) {
			full := k
			if prefix != "" {
				full = prefix + "." + k
			}
			d := editDistance(strings.ToLower(key), k)
			if prefix != path && d > 0 {
				d++ // a near miss in the section written beats one elsewhere
			}
			if d < bestDist || (d == bestDist && full < best) {
				best, bestDist = full, d
			}
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				visit(full, ft)
			}
		}
	}
	visit("", reflect.TypeFor[policyDoc]())
	if best == "" {
		return ""
	}
	return ": did you mean " + best + "?"
}

// quoted is a field's path as an error names it: whole, or its first
// maxQuotedKey bytes and how long it is.
func quoted(path string) string {
	if len(path) <= maxQuotedKey {
		return path
	}
	cut := maxQuotedKey
	for cut > 0 && !utf8.RuneStart(path[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", path[:cut], len(path))
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// lineCol says where offset lies in data: "line 3, column 7".
func lineCol(data []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(data)))
	line := 1 + bytes.Count(data[:offset], []byte("\n"))
	col := 1 + utf8.RuneCount(data[bytes.LastIndexByte(data[:offset], '\n')+1:offset]) // characters, not bytes
	return fmt.Sprintf("line %d, column %d", line, col)
}

// syntaxAt is where a syntax error is: its offset counts the byte at
// fault, but for the end of the input, which has none.
func syntaxAt(data []byte, se *json.SyntaxError) int64 {
	if se.Offset >= int64(len(data)) {
		return se.Offset
	}
	return se.Offset - 1
}

// located adds the line and column of a JSON syntax error in data, found
// at base + its offset.
func located(err error, data []byte, base int64) error {
	var se *json.SyntaxError
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		var v any
		if errors.As(json.Unmarshal(data, &v), &se) {
			return fmt.Errorf("%s: %w", lineCol(data, syntaxAt(data, se)), se)
		}
	}
	if errors.As(err, &se) {
		// A Decoder's offsets count from where it began, not from the
		// value: find the error's place in the whole of data instead.
		var all *json.SyntaxError
		var v any
		if errors.As(json.Unmarshal(data, &v), &all) {
			return fmt.Errorf("%s: %w", lineCol(data, syntaxAt(data, all)), err)
		}
		return fmt.Errorf("%s: %w", lineCol(data, base+se.Offset-1), err)
	}
	var fe *fieldError
	if errors.As(err, &fe) && fe.at >= 0 {
		return fmt.Errorf("%s: %w", lineCol(data, base+fe.at), err)
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
