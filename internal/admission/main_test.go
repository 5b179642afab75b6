package admission

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fullLoad runs the pacers' simulations at full size: make test does,
// without the race detector. A plain go test runs them smaller.
var fullLoad = flag.Bool("load.full", false, "run the simulations at full size")

// loadSize is full with -load.full and without the race detector, else
// small.
func loadSize(full, small int) int {
	if *fullLoad && !raceEnabled {
		return full
	}
	return small
}
