package webhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicemq/sluice/webhook"
)

// A receiver checks a call's Sluice-Signature over the raw body it read:
// with webhook.Verify, or with the standard library alone as below.
func ExampleVerify() {
	secret := []byte("the shared secret, 16+ bytes")
	body := []byte(`{"events":[{"queue":"orders","deadLetterQueue":"orders-dlq","messageId":"5fea7756-0ea4-451a-a703-a558b933e274","reason":"lease expired","attempts":5,"receiveCount":5,"at":"2024-06-01T12:00:00.000000Z"}]}`)
	sent := time.Date(2024, 6, 1, 12, 0, 1, 0, time.UTC)
	header := "t=" + strconv.FormatInt(sent.Unix(), 10) + ",v1=" + webhook.Sign(secret, sent.Unix(), body)

	fmt.Println(webhook.Verify(secret, header, body, sent.Add(3*time.Second), 5*time.Minute))

	// The same check without this package.
	var ts, v1 string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = v
		}
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	t, _ := strconv.ParseInt(ts, 10, 64)
	fresh := sent.Add(3*time.Second).Sub(time.Unix(t, 0)).Abs() <= 5*time.Minute
	fmt.Println(hmac.Equal([]byte(v1), []byte(want)) && fresh)
	// Output:
	// <nil>
	// true
}
