package apicommon

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

func TestCheckJSONArrays(t *testing.T) {
	t.Parallel()
	elems := func(n int, e string) string { return "[" + strings.TrimSuffix(strings.Repeat(e+",", n), ",") + "]" }
	for _, c := range []struct {
		name, body string
		ok         bool
	}{
		{"empty", ``, true},
		{"at the bound", `{"a":` + elems(MaxJSONArray, "{}") + `}`, true},
		{"past the bound", `{"a":` + elems(MaxJSONArray+1, "{}") + `}`, false},
		{"nested past the bound", `[[` + elems(MaxJSONArray+1, "1") + `]]`, false},
		{"commas in strings", `["` + strings.Repeat(",", 5000) + `"]`, true},
		{"escaped quote", `["\",` + strings.Repeat(",", 5000) + `"]`, true},
		{"object members", `{` + strings.TrimSuffix(strings.Repeat(`"a":1,`, 5000), ",") + `}`, true},
		{"many small arrays", strings.Repeat(elems(10, "1"), 5000), true},
		{"deep", strings.Repeat("[", 100000), true},
		{"unbalanced", strings.Repeat("]", 10) + elems(5, "1"), true},
	} {
		err := CheckJSONArrays([]byte(c.body))
		if c.ok != (err == nil) || err != nil && !errors.Is(err, model.ErrInvalidRequest) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// FuzzCheckJSONArrays: the scan never panics on any bytes.
func FuzzCheckJSONArrays(f *testing.F) {
	f.Add([]byte(`{"Entries":[{},{}]}`))
	f.Add([]byte(`["\\",",",]]]`))
	f.Fuzz(func(t *testing.T, b []byte) { _ = CheckJSONArrays(b) })
}
