package model

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// testReceipts is a codec with a fixed key, so seeds stay valid.
var testReceipts = func() *ReceiptCodec {
	c, err := NewReceiptCodec(bytes.Repeat([]byte{7}, ReceiptKeySize))
	if err != nil {
		panic(err)
	}
	return c
}()

func TestReceiptRoundTrip(t *testing.T) {
	t.Parallel()
	for _, r := range []Receipt{{}, {QueueID: 7, Key: 1 << 40, Lease: 3}, {QueueID: ^uint64(0), Key: ^uint64(0), Lease: ^uint64(0)}} {
		h := testReceipts.Encode(r)
		got, err := testReceipts.Decode(h)
		if err != nil || got != r {
			t.Fatalf("Decode(Encode(%v)) = %v, %v", r, got, err)
		}
		if h2 := testReceipts.Encode(r); h2 != h {
			t.Errorf("Encode(%v) gave %q then %q: one lease must have one handle", r, h, h2)
		}
		if len(h) > maxReceiptHandle {
			t.Errorf("Encode(%v) is %d chars, longer than Decode accepts", r, len(h))
		}
	}
}

func TestReceiptRefused(t *testing.T) {
	t.Parallel()
	r := Receipt{QueueID: 7, Key: 1 << 40, Lease: 3}
	h := testReceipts.Encode(r)
	raw, _ := base64.RawURLEncoding.DecodeString(h)

	other, _ := NewReceiptCodec(bytes.Repeat([]byte{8}, ReceiptKeySize))
	forged := append([]byte(nil), raw...)
	forged[len(forged)-1] ^= 1
	// Altered: the lease changed and re-encoded without the key (the old MAC kept).
	altered := r
	altered.Lease++
	alteredRaw := append(altered.fields(nil), raw[len(raw)-receiptMACSize:]...)
	// A version-1 handle as the broker made before signing.
	v1 := binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint([]byte{1}, 7), 1<<40), 3)
	v1 = append(v1, 1, 2, 3, 4)
	// A non-minimal uvarint for the queue id (0x87 0x00 = 7), MAC'd with the key:
	// only the minimal form is the handle.
	nonMin := append([]byte{receiptV2, 0x87, 0x00}, raw[2:len(raw)-receiptMACSize]...)
	nonMin = testReceipts.mac(nonMin, nonMin)

	cases := map[string]string{
		"empty":          "",
		"garbage":        "garbage",
		"short":          "AAAA",
		"suffix":         h + "x",
		"crlf inside":    h[:10] + "\r\n" + h[10:],
		"newline at end": h + "\n",
		"padding":        h + "=",
		"std alphabet":   strings.NewReplacer("-", "+", "_", "/").Replace(h) + "+/",
		"spare bits":     h[:len(h)-1] + string(flipLowBits(h[len(h)-1])),
		"forged MAC":     base64.RawURLEncoding.EncodeToString(forged),
		"altered lease":  base64.RawURLEncoding.EncodeToString(alteredRaw),
		"other key":      other.Encode(r),
		"version 1":      base64.RawURLEncoding.EncodeToString(v1),
		"non-minimal":    base64.RawURLEncoding.EncodeToString(nonMin),
		"oversize":       strings.Repeat("A", 4096),
		"space":          " " + h,
		"invalid utf-8":  h + "\xff",
		"truncated":      h[:len(h)-4],
	}
	for name, s := range cases {
		if got, err := testReceipts.Decode(s); !errors.Is(err, ErrReceiptHandleInvalid) {
			t.Errorf("%s: Decode(%q) = %v, %v; want ErrReceiptHandleInvalid", name, s, got, err)
		}
	}
}

// flipLowBits returns the base64url character whose value differs from c's
// in its lowest bits, which the last character of a handle leaves spare.
func flipLowBits(c byte) byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, c)
	return alphabet[i^1]
}

func TestReceiptKeySize(t *testing.T) {
	t.Parallel()
	if _, err := NewReceiptCodec(make([]byte, 16)); err == nil {
		t.Fatal("NewReceiptCodec took a 16-byte key")
	}
	k1, err := NewReceiptKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, _ := NewReceiptKey()
	if len(k1) != ReceiptKeySize || bytes.Equal(k1, k2) {
		t.Fatalf("NewReceiptKey: %x, %x", k1, k2)
	}
}

// FuzzDecodeReceipt checks that decoding never panics, that every handle
// Encode makes decodes to its receipt, and that any string that decodes is
// the one Encode makes of the result (one lease, one handle string).
func FuzzDecodeReceipt(f *testing.F) {
	h := testReceipts.Encode(Receipt{QueueID: 7, Key: 1 << 40, Lease: 3})
	for _, s := range []string{"", "AAAA", h, h[:10] + "\r\n" + h[10:], h + "=", testReceipts.Encode(Receipt{})} {
		f.Add(s, uint64(1), uint64(2), uint64(3))
	}
	f.Fuzz(func(t *testing.T, s string, qid, key, lease uint64) {
		if r, err := testReceipts.Decode(s); err == nil {
			if again := testReceipts.Encode(r); again != s {
				t.Fatalf("Decode(%q) = %v, which encodes as %q", s, r, again)
			}
		} else if !errors.Is(err, ErrReceiptHandleInvalid) {
			t.Fatalf("Decode(%q): %v", s, err)
		}
		r := Receipt{QueueID: qid, Key: key, Lease: lease}
		got, err := testReceipts.Decode(testReceipts.Encode(r))
		if err != nil || got != r {
			t.Fatalf("Decode(Encode(%v)) = %v, %v", r, got, err)
		}
	})
}

// BenchmarkReceiptCodec is one receive's Encode and one delete's Decode.
func BenchmarkReceiptCodec(b *testing.B) {
	c, err := NewReceiptCodec(make([]byte, ReceiptKeySize))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	r := Receipt{QueueID: 7, Key: 123456789, Lease: 3}
	for b.Loop() {
		if got, err := c.Decode(c.Encode(r)); err != nil || got != r {
			b.Fatal(got, err)
		}
	}
}
