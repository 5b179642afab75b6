package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// A Document is one document's JSON in a file of them: its key in an
// object of them keyed by name ("" in a list or alone), and where it
// starts.
type Document struct {
	Key   string
	Raw   json.RawMessage
	Start int64
}

// Documents splits a file into its documents: one (an object with a field
// of the schema among its keys), a list of them, or an object of them
// keyed by name (KeyNoun), each a document or a list of them. A name
// written twice, or data after the value, is an error.
func (s Schema) Documents(data []byte) ([]Document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, Located(err, data, 0)
	}
	var docs []Document
	switch tok {
	case json.Delim('['):
		docs, err = list(dec, data, "")
	case json.Delim('{'):
		// An object with a key that is a field of the schema is one
		// document (whose name may be missing), not documents by name.
		if s.isDocument(data) {
			return []Document{{Raw: bytes.TrimSpace(data), Start: OffsetOf(data, 0)}}, s.trailing(dec, data, true)
		}
		docs, err = s.keyed(dec, data)
	default:
		return nil, fmt.Errorf("want a %s, a list of %s or an object of them keyed by %s", s.Noun, s.Plural, s.KeyNoun)
	}
	if err != nil {
		return nil, err
	}
	return docs, s.trailing(dec, data, false)
}

// isDocument reports whether the object in data has a field of the schema
// among its keys, read in order up to the first value that does not parse.
func (s Schema) isDocument(data []byte) bool {
	fields := Fields(s.Root)
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if _, ok := fields[tok.(string)]; ok {
			return true
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return false
		}
	}
	return false
}

// keyed reads an object of documents keyed by name, after its '{'.
func (s Schema) keyed(dec *json.Decoder, data []byte) ([]Document, error) {
	var docs []Document
	seen := map[string]bool{}
	for dec.More() {
		keyAt := OffsetOf(data, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil, Located(err, data, 0)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, fmt.Errorf("%s: %s %q is written twice", LineCol(data, dec.InputOffset()), s.KeyNoun, name)
		}
		seen[name] = true
		ds, err := s.keyedValue(dec, data, name, keyAt)
		if err != nil {
			return nil, err
		}
		docs = append(docs, ds...)
	}
	_, err := dec.Token() // '}'
	return docs, Located(err, data, 0)
}

// keyedValue reads the documents under name, its key at keyAt: a list of
// them, or one.
func (s Schema) keyedValue(dec *json.Decoder, data []byte, name string, keyAt int64) ([]Document, error) {
	start := OffsetOf(data, dec.InputOffset())
	if start < int64(len(data)) && data[start] == '[' {
		if _, err := dec.Token(); err != nil {
			return nil, Located(err, data, 0)
		}
		ops, err := list(dec, data, name)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", s.KeyNoun, name, err)
		}
		return ops, nil
	}
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s %q: %w", s.KeyNoun, name, Located(err, data, start))
	}
	if hint := s.DidYouMean(name, ""); len(v) > 0 && v[0] != '{' && hint != "" {
		// A scalar where a document should be, under a key a letter
		// or two from a field: one document with a typo in its key,
		// not an object of documents.
		return nil, Located(&FieldError{Field: Quoted(name), Msg: "not a field of the " + s.Noun + hint, At: keyAt}, data, 0)
	}
	return []Document{{name, v, start}}, nil
}

// list reads the documents of a list, after its '['.
func list(dec *json.Decoder, data []byte, key string) ([]Document, error) {
	var docs []Document
	for dec.More() {
		start := OffsetOf(data, dec.InputOffset())
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, Located(err, data, start)
		}
		docs = append(docs, Document{key, v, start})
	}
	_, err := dec.Token() // ']'
	return docs, Located(err, data, 0)
}

// trailing reports data after the value that dec has read, or, if whole,
// reads the value first.
func (s Schema) trailing(dec *json.Decoder, data []byte, whole bool) error {
	if whole {
		var v json.RawMessage
		dec = json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(&v); err != nil {
			return Located(err, data, 0)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: data after the %s", LineCol(data, dec.InputOffset()), s.Plural)
	}
	return nil
}
