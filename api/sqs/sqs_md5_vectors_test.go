package sqs

import (
	"testing"

	"github.com/sluicemq/sluice/broker/model"
)

func TestMD5Vectors(t *testing.T) {
	t.Parallel()
	s := func(v string) model.MessageAttribute {
		return model.MessageAttribute{DataType: "String", StringValue: v}
	}
	n := func(v string) model.MessageAttribute {
		return model.MessageAttribute{DataType: "Number", StringValue: v}
	}
	if got := MD5OfBody(`{"message_index":1}`); got != "4504dd781f625d681c31cda87e260702" {
		t.Errorf("body md5 = %s", got)
	}
	cases := []struct {
		attrs map[string]model.MessageAttribute
		want  string
	}{
		{map[string]model.MessageAttribute{"test-key": s("test-value")}, "befa18540a897f7d022bf07057754a03"},
		{map[string]model.MessageAttribute{"test-key": s("test-value"), "test-key-alt": s("test-value-alt")}, "2256c3b617e2b4b3ae4f2d455dcf54d0"},
		{map[string]model.MessageAttribute{"MyAttribute": s("foobar")}, "adb59cd4678ea5a855436b949cd07ab6"},
		{map[string]model.MessageAttribute{"AWSTraceHeader": s("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")}, "5ae4d5d7636402d80f4eb6d213245a88"},
		{map[string]model.MessageAttribute{"timestamp": n("1493147359900")}, "235c5c510d26fb653d073faed50ae77c"},
		{map[string]model.MessageAttribute{"ordinal": n("1"), "category": s("test")}, "d21ae90c49061e927f57df5f5d72be1f"},
		{map[string]model.MessageAttribute{"SellerName": s("Example Store")}, "cd28f3b68aeee4b2eac9c66f2f694b58"},
		{nil, ""},
	}
	for _, c := range cases {
		if got := MD5OfAttributes(c.attrs); got != c.want {
			t.Errorf("MD5OfAttributes(%v) = %s, want %s", c.attrs, got, c.want)
		}
	}
}
