package sqs

import (
	"bytes"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// splitQueueFromPath and splitQueueFromURL are the forms of queueFromPath
// and queueFromURL that split the whole path.
func splitQueueFromPath(path string) (account, queue string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", ""
	}
	return parts[0], parts[1]
}

func splitQueueFromURL(u string) (account, queue string, ok bool) {
	if !strings.Contains(u, "://") && !strings.ContainsAny(u, "/?#") {
		return "", u, u != ""
	}
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		j := strings.IndexByte(u, '/')
		if j < 0 {
			return "", "", false
		}
		u = u[j:]
	}
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	parts := strings.Split(strings.Trim(u, "/"), "/")
	if len(parts) < 2 || parts[len(parts)-1] == "" || parts[len(parts)-2] == "" {
		return "", "", false
	}
	return parts[len(parts)-2], parts[len(parts)-1], true
}

// TestQueuePathsMatchSplit: the path and URL parsers find the account and
// queue the split forms find, on random paths of segments and separators.
func TestQueuePathsMatchSplit(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"/", "//", "a", "000000000000", "q", "http://", "https://h:9324", "?x=/y", "#f", ":", ""}
	for range 20000 {
		var sb strings.Builder
		for range r.IntN(7) {
			sb.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := sb.String()
		a1, q1 := queueFromPath(s)
		a2, q2 := splitQueueFromPath(s)
		if a1 != a2 || q1 != q2 {
			t.Fatalf("queueFromPath(%q) = %q, %q; split: %q, %q", s, a1, q1, a2, q2)
		}
		a1, q1, ok1 := queueFromURL(s)
		a2, q2, ok2 := splitQueueFromURL(s)
		if a1 != a2 || q1 != q2 || ok1 != ok2 {
			t.Fatalf("queueFromURL(%q) = %q, %q, %v; split: %q, %q, %v", s, a1, q1, ok1, a2, q2, ok2)
		}
	}
}

// TestReadAll: readAll reads what io.ReadAll reads, whatever the size it is
// told, a byte at a time or at once.
func TestReadAll(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 70000} {
		want := bytes.Repeat([]byte("ab"), n)[:n]
		for _, size := range []int64{-1, 0, int64(n) - 1, int64(n), int64(n) + 1, 1 << 20} {
			for _, rd := range []io.Reader{bytes.NewReader(want), iotest.OneByteReader(bytes.NewReader(want))} {
				got, err := readAll(rd, size, 1<<20)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("n=%d size=%d: %d bytes, %v", n, size, len(got), err)
				}
			}
		}
	}
}
