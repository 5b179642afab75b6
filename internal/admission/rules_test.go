package admission

import (
	"os"
	"regexp"
	"testing"
)

// controllerFiles hold admission's controllers, and the health they
// read: none of them reads the clock or runs a timer; the time is in
// what they are asked and told.
var controllerFiles = []string{"budget.go", "breaker.go", "hold.go", "throttle.go", "staticrate.go", "quota.go", "limit.go", "health.go"}

// clockRead matches a read of the clock, or a timer.
var clockRead = regexp.MustCompile(`time\.(Now|Since|Until|NewTimer|After|AfterFunc|Sleep|Tick|NewTicker)\(|\bmono\(\)|\bunixSecond\(\)`)

func TestControllersDoNotReadTheClock(t *testing.T) {
	for _, name := range controllerFiles {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range clockRead.FindAll(src, -1) {
			t.Errorf("%s reads the clock (%s): admission gives a controller the time in what it is asked and told", name, m)
		}
	}
}

// The header of admission.go names the file of every controller in its
// list, in the list's order.
func TestAdmissionHeaderNamesEveryController(t *testing.T) {
	src, err := os.ReadFile("admission.go")
	if err != nil {
		t.Fatal(err)
	}
	header := string(src[:regexp.MustCompile(`\npackage `).FindIndex(src)[0]])
	at := 0
	for _, name := range []string{"budget.go", "breaker.go", "throttle.go", "staticrate.go", "quota.go", "limit.go"} {
		i := regexp.MustCompile(regexp.QuoteMeta(name)).FindStringIndex(header[at:])
		if i == nil {
			t.Errorf("admission.go's header does not name %s after the controllers before it", name)
			continue
		}
		at += i[1]
	}
	if len(controllers) != 6 {
		t.Errorf("admission has %d controllers; the header names 6", len(controllers))
	}
}
