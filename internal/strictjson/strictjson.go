// Package strictjson reads JSON along a schema (a Go struct type and its
// `json` tags) strictly: every key of an object must be a field's, exactly,
// and written once; values nest at most MaxDepth deep; errors name the
// field, what it takes, what was written, and where, by line and column.
// It knows nothing of what the schema means: its callers do.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// The reader's limits: how deep values may nest (a value nested past it is
// an error, not a stack that grows with the input), and how much of a key
// an error quotes.
const (
	MaxDepth     = 32
	MaxQuotedKey = 64
)

// A FieldError is about one field, found at offset At of its JSON (-1 if
// not known).
type FieldError struct {
	Field, Msg string
	At         int64
}

func (e *FieldError) Error() string { return "field " + e.Field + ": " + e.Msg }

// Errorf is a FieldError about field, not located.
func Errorf(field, format string, args ...any) error {
	return &FieldError{field, fmt.Sprintf(format, args...), -1}
}

// A Schema is what a document must be: the struct type Root, called Noun
// in errors ("not a field of the policy"), Plural for several, and
// KeyNoun for the name that keys each in an object of them.
type Schema struct {
	Root                  reflect.Type
	Noun, Plural, KeyNoun string
}

// Check walks the JSON value in data along the schema: every key of an
// object must be one of its fields' names, exactly, and written once.
// Values are left to Decode.
func (s Schema) Check(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := walker{s: s, dec: dec, data: data}
	return w.value(s.Root, "", 0)
}

type walker struct {
	s    Schema
	dec  *json.Decoder
	data []byte
}

func (w *walker) value(t reflect.Type, path string, depth int) error {
	if depth > MaxDepth {
		return &FieldError{Quoted(path), fmt.Sprintf("nested deeper than %d", MaxDepth), OffsetOf(w.data, w.dec.InputOffset())}
	}
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch tok {
	case json.Delim('{'):
		return w.object(t, path, depth)
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Slice {
			elem = t.Elem()
		}
		for w.dec.More() {
			if err := w.value(elem, path, depth+1); err != nil {
				return err
			}
		}
		_, err = w.dec.Token()
		return err
	}
	return nil
}

// object walks an object's keys and values, after its '{'.
func (w *walker) object(t reflect.Type, path string, depth int) error {
	var fields map[string]reflect.Type
	if t != nil && t.Kind() == reflect.Struct {
		fields = Fields(t)
	}
	seen := map[string]bool{}
	for w.dec.More() {
		at := w.dec.InputOffset()
		ktok, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, _ := ktok.(string)
		at = OffsetOf(w.data, at)
		full := join(path, key)
		ft, ok := fields[key]
		switch {
		case fields != nil && !ok:
			return &FieldError{Quoted(full), "not a field of the " + w.s.Noun + w.s.DidYouMean(key, path), at}
		case seen[key]:
			return &FieldError{Quoted(full), "written twice", at}
		}
		seen[key] = true
		if err := w.value(ft, full, depth+1); err != nil {
			return err
		}
	}
	_, err := w.dec.Token()
	return err
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Decode decodes data, whose keys Check has checked, into v.
func (s Schema) Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &FieldError{te.Field, fmt.Sprintf("want %s, not %s", KindWords(te.Type), valueWords(te.Value)), KeyOffset(data, te.Field)}
		}
		if errors.As(err, &te) {
			return fmt.Errorf("want a %s (a section of fields), not %s", s.Noun, valueWords(te.Value))
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: data after the %s", LineCol(data, dec.InputOffset()), s.Noun)
	}
	return nil
}

// KindWords says what a field of type t takes, in words that are neither
// JSON's nor Go's, so that a YAML file's errors read as well.
func KindWords(t reflect.Type) string {
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
		return "a list of " + strings.TrimPrefix(KindWords(t.Elem()), "a ") + "s"
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

// Fields are the fields of struct type t, by their JSON keys.
func Fields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for f := range t.Fields() {
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "" && tag != "-" {
			m[tag] = f.Type
		}
	}
	return m
}
