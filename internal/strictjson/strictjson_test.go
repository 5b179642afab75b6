package strictjson

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

type inner struct {
	Delay int `json:"initial_delay"`
}

type doc struct {
	Name  string  `json:"name"`
	Retry *inner  `json:"retry"`
	Codes []int   `json:"codes"`
	Ratio float64 `json:"ratio"`
}

var schema = Schema{Root: reflect.TypeFor[doc](), Noun: "thing"}

func TestCheckNamesTheField(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"nmae": "x"}`, `field nmae: not a field of the thing: did you mean name?`},
		{`{"retry": {"initial_dealy": 1}}`, `field retry.initial_dealy: not a field of the thing: did you mean retry.initial_delay?`},
		{`{"initial_delay": 1}`, `did you mean retry.initial_delay?`},
		{`{"name": "a", "name": "b"}`, `field name: written twice`},
		{`{"zzzzzzzz": 1}`, `field zzzzzzzz: not a field of the thing`},
		{`{"codes": ` + strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2) + "}", "nested deeper than 32"},
	} {
		err := schema.Check([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%.40s) = %v, want %q", c.in, err, c.want)
		}
	}
	if err := schema.Check([]byte(`{"name": "a", "retry": {"initial_delay": 5}, "codes": [1, 2]}`)); err != nil {
		t.Errorf("a valid document: %v", err)
	}
}

func TestDecodeSaysWhatAFieldTakes(t *testing.T) {
	var d doc
	err := schema.Decode([]byte("{\n  \"codes\": \"503\"}"), &d)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "codes" || fe.Msg != "want a list of whole numbers, not a string" {
		t.Fatalf("Decode: %#v", err)
	}
	if got := Located(err, []byte("{\n  \"codes\": \"503\"}"), 0).Error(); !strings.HasPrefix(got, "line 2, column 3: ") {
		t.Errorf("Located = %q, want line 2, column 3", got)
	}
	if err := schema.Decode([]byte(`{"ratio": 1} x`), &d); err == nil || !strings.Contains(err.Error(), "data after the thing") {
		t.Errorf("trailing data: %v", err)
	}
	if err := schema.Decode([]byte(`[1]`), &d); err == nil || !strings.Contains(err.Error(), "want a thing (a section of fields), not a list") {
		t.Errorf("a list for a document: %v", err)
	}
}

func TestQuotedCutsLongKeysOnARune(t *testing.T) {
	long := strings.Repeat("é", MaxQuotedKey)
	q := Quoted(long)
	if !strings.HasSuffix(q, "… (128 bytes)") || len(q) > MaxQuotedKey+len("… (128 bytes)") {
		t.Errorf("Quoted = %q", q)
	}
	if Quoted("a.b") != "a.b" {
		t.Error("a short path is quoted whole")
	}
}

func TestLineColCountsCharacters(t *testing.T) {
	if got := LineCol([]byte("ab\n\"é\": x"), 7); got != "line 2, column 4" {
		t.Errorf("LineCol = %q", got)
	}
	if KeyOffset([]byte(`{"retry": {"initial_delay": 1}}`), "retry.initial_delay") != 11 {
		t.Error("KeyOffset misses a nested key")
	}
}
