package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"
)

// KeyOffset is where the key of the field at path is in data, or -1.
func KeyOffset(data []byte, path string) int64 {
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
			return OffsetOf(data, at)
		}
	}
}

// DidYouMean names the field that key, found under path, was probably
// meant to be: one a letter or two away, written in another case, or in
// another section of the schema; "" if none is near.
func (s Schema) DidYouMean(key, path string) string {
	if len(key) > MaxQuotedKey {
		return "" // no field is near so long a key: not measured
	}
	best, bestDist := "", 3+len(key)/6 // 3 for a short key, 4 for "initial_delay"
	var visit func(prefix string, t reflect.Type)
	visit = func(prefix string, t reflect.Type) {
		for k, ft := range Fields(t) {
			full := join(prefix, k)
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
	visit("", s.Root)
	if best == "" {
		return ""
	}
	return ": did you mean " + best + "?"
}

// Quoted is a field's path as an error names it: whole, or its first
// MaxQuotedKey bytes and how long it is.
func Quoted(path string) string {
	if len(path) <= MaxQuotedKey {
		return path
	}
	cut := MaxQuotedKey
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

// OffsetOf is the offset of the first byte at or after off that is not
// space or a separator.
func OffsetOf(data []byte, off int64) int64 {
	return off + int64(len(data[off:])-len(bytes.TrimLeft(data[off:], " \t\r\n:,")))
}

// LineCol says where offset lies in data: "line 3, column 7".
func LineCol(data []byte, offset int64) string {
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

// Located adds the line and column of a JSON syntax error or a located
// FieldError in data, found at base + its offset.
func Located(err error, data []byte, base int64) error {
	var se *json.SyntaxError
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		var v any
		if errors.As(json.Unmarshal(data, &v), &se) {
			return fmt.Errorf("%s: %w", LineCol(data, syntaxAt(data, se)), se)
		}
	}
	if errors.As(err, &se) {
		// A Decoder's offsets count from where it began, not from the
		// value: find the error's place in the whole of data instead.
		var all *json.SyntaxError
		var v any
		if errors.As(json.Unmarshal(data, &v), &all) {
			return fmt.Errorf("%s: %w", LineCol(data, syntaxAt(data, all)), err)
		}
		return fmt.Errorf("%s: %w", LineCol(data, base+se.Offset-1), err)
	}
	var fe *FieldError
	if errors.As(err, &fe) && fe.At >= 0 {
		return fmt.Errorf("%s: %w", LineCol(data, base+fe.At), err)
	}
	return err
}

// Nearest is the word of among nearest to w, written in any case, if it
// is within a third of w's length (at least 2 edits); "" if none is.
func Nearest(w string, among ...string) string {
	best, bestDist := "", max(2, len(w)/3)+1
	for _, a := range among {
		if d := editDistance(strings.ToLower(w), a); d < bestDist {
			best, bestDist = a, d
		}
	}
	return best
}
