//go:build race

package embedded

// raceEnabled: the race detector is on (CI's race tier), which makes the
// heavy tests slow, so they run at a smaller scale.
const raceEnabled = true
