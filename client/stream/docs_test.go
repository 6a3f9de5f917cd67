package stream_test

import (
	"os"
	"strings"
	"testing"
)

// The Go code of docs/streams.md is the body of Example (example_test.go),
// which go vet and go test compile: the page shows code that builds.
func TestDocsGoExample(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/streams.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	for _, l := range strings.Split(string(page), "\n") {
		switch {
		case !in && l == "```go":
			in, cur = true, nil
		case in && l == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, l)
		}
	}
	if len(blocks) != 1 {
		t.Fatalf("docs/streams.md has %d go blocks, want 1 (the Example's body)", len(blocks))
	}
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, ok := strings.Cut(string(src), "\nfunc Example() {\n")
	if !ok {
		t.Fatal("example_test.go has no func Example")
	}
	body, _, ok = strings.Cut(body, "\n}\n")
	if !ok {
		t.Fatal("func Example does not end")
	}
	var want []string
	for _, l := range strings.Split(body, "\n") {
		want = append(want, strings.TrimPrefix(l, "\t"))
	}
	if got := blocks[0]; got != strings.Join(want, "\n") {
		t.Errorf("the go block of docs/streams.md is not the body of Example in example_test.go: copy it again.\npage:\n%s\nexample:\n%s", got, strings.Join(want, "\n"))
	}
}
