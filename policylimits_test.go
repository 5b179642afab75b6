package retryhttp

import (
	"bytes"
	"strings"
	"testing"
)

// A hostile policy document gets an error, not a crash, a hang or an
// error as long as itself: nesting is bounded, a long unknown key is
// quoted in part and not measured against every field, and input past
// LoadPolicies' limit is refused, not cut.
func TestPolicyReaderLimits(t *testing.T) {
	deep := append([]byte(`{"retry":`), bytes.Repeat([]byte("["), 10<<20)...)
	if _, err := ParsePolicy(deep); err == nil || !strings.Contains(err.Error(), "nested deeper than 32") {
		t.Errorf("10 MiB of '[': %v; want an error naming the depth limit", err)
	}
	if _, err := LoadPolicies(bytes.NewReader(deep)); err == nil {
		t.Error("LoadPolicies of 10 MiB of '[': no error")
	}
	long := `{"dependency":"d","` + strings.Repeat("k", 2<<20) + `":1}`
	_, err := ParsePolicy([]byte(long))
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "(2097152 bytes)") {
		t.Errorf("a 2 MiB unknown key: %d-byte error %.200q; want one that quotes its start and says its length", len(err.Error()), err)
	}
	if _, err := ParsePolicy([]byte(`{"dependency":"d","retyr":{}}`)); err == nil || !strings.Contains(err.Error(), "did you mean retry?") {
		t.Errorf("a near miss: %v; want the suggestion still made", err)
	}
	one := `[{"dependency":"a"}` + strings.Repeat(" ", 16<<20) + `, {"dependency":"b","bogus":1}]`
	if _, err := LoadPolicies(strings.NewReader(one)); err == nil || !strings.Contains(err.Error(), "longer than 16 MiB") {
		t.Errorf("a policy, 16 MiB of blanks, an invalid policy: %v; want the input refused as too long", err)
	}
	if _, err := LoadPolicies(strings.NewReader("{\n  \"dependncy\": \"rates\"\n}")); err == nil ||
		err.Error() != "retryhttp: policies: line 2, column 3: field dependncy: not a field of the policy: did you mean dependency?" {
		t.Errorf("a typo in a top-level key: %v; want its place and the field meant", err)
	}
	short := `[{"dependency":"a"}` + strings.Repeat(" ", 1<<10) + `, {"dependency":"b","bogus":1}]`
	if _, err := LoadPolicies(strings.NewReader(short)); err == nil {
		t.Error("a policy, 1 KiB of blanks, an invalid policy: no error")
	}
}

// FuzzPolicyShapes builds hostile documents from sizes (deep nesting, a
// long key, a long gap between policies) around a fuzzed fragment: the
// reader never crashes, and its errors stay short.
func FuzzPolicyShapes(f *testing.F) {
	f.Add(uint16(40), uint32(10), uint32(0), []byte(`1`))
	f.Add(uint16(0), uint32(70_000), uint32(10), []byte(`{}`))
	f.Add(uint16(5), uint32(3), uint32(100_000), []byte(`"x"`))
	f.Add(uint16(2000), uint32(0), uint32(0), []byte(`[`))
	f.Fuzz(func(t *testing.T, depth uint16, keyLen, gap uint32, frag []byte) {
		keyLen, gap = keyLen%(1<<20), gap%(1<<20) // up to 1 MiB each
		var b bytes.Buffer
		b.WriteString(`[{"dependency":"a","retry":`)
		b.Write(bytes.Repeat([]byte("["), int(depth)))
		b.Write(frag)
		b.Write(bytes.Repeat([]byte("]"), int(depth)))
		b.WriteString(`},`)
		b.Write(bytes.Repeat([]byte(" "), int(gap)))
		b.WriteString(`{"dependency":"b","`)
		b.Write(bytes.Repeat([]byte("k"), int(keyLen)))
		b.WriteString(`":1}]`)
		data := b.Bytes()
		for _, err := range []error{parseErr(data), loadErr(data)} {
			if err != nil && len(err.Error()) > 1024 {
				t.Fatalf("a %d-byte error for a %d-byte document", len(err.Error()), len(data))
			}
		}
		if loadErr(data) == nil && keyLen > 0 {
			t.Fatalf("an unknown key of %d bytes was accepted", keyLen)
		}
	})
}

func parseErr(data []byte) error { _, err := ParsePolicy(data); return err }
func loadErr(data []byte) error  { _, err := LoadPolicies(bytes.NewReader(data)); return err }
