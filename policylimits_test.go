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
	short := `[{"dependency":"a"}` + strings.Repeat(" ", 1<<10) + `, {"dependency":"b","bogus":1}]`
	if _, err := LoadPolicies(strings.NewReader(short)); err == nil {
		t.Error("a policy, 1 KiB of blanks, an invalid policy: no error")
	}
}
