package sqs

import (
	"crypto/md5"
	"encoding/hex"
	"strings"
	"testing"
)

// TestMD5OfBodyPieces: the body hashed a piece at a time gives md5.Sum's
// digest, at every length around the buffer's.
func TestMD5OfBodyPieces(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 63, 64, 65, 4095, 4096, 4097, 8192, 10000, 256 << 10} {
		body := strings.Repeat("ab\x00é\xff", n/6+1)[:n]
		sum := md5.Sum([]byte(body))
		if got, want := MD5OfBody(body), hex.EncodeToString(sum[:]); got != want {
			t.Errorf("%d bytes: %s, want %s", n, got, want)
		}
	}
}

// BenchmarkMD5OfBody hashes a 256-byte body, as every send and receive of
// BenchmarkHTTPSendReceiveDelete does.
func BenchmarkMD5OfBody(b *testing.B) {
	body := strings.Repeat("x", 256)
	b.ReportAllocs()
	for b.Loop() {
		MD5OfBody(body)
	}
}
