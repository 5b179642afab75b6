//go:build race

package admission

// raceEnabled: the race detector makes each goroutine far heavier, so the
// largest load tests run smaller under it; make test runs them whole
// without it too.
const raceEnabled = true
