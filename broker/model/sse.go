package model

import "strconv"

// The server-side-encryption attributes. Sluice stores and returns them (its
// own store is not encrypted by them) with SQS's rules, so that clients
// and infrastructure tools that set them read back what AWS would answer:
//
//   - SqsManagedSseEnabled is true on a new queue; only one of SSE-SQS and
//     SSE-KMS is active, so setting KmsMasterKeyId turns it to false, and
//     setting SqsManagedSseEnabled=true removes the KMS settings;
//   - KmsDataKeyReusePeriodSeconds is 60..86400 and is returned once set;
//   - setting KmsMasterKeyId to "" removes both KMS attributes.
const (
	AttrKmsMasterKeyId               = "KmsMasterKeyId"
	AttrKmsDataKeyReusePeriodSeconds = "KmsDataKeyReusePeriodSeconds"
	AttrSqsManagedSseEnabled         = "SqsManagedSseEnabled"
)

// applyExtra applies one of the stored-only attributes (extraAttrs) to c.
func (c *QueueConfig) applyExtra(name, v string) error {
	switch name {
	case AttrKmsDataKeyReusePeriodSeconds:
		n, err := parseInt(name, v, 60, 86400)
		if err != nil {
			return err
		}
		c.Extra[name] = strconv.FormatInt(n, 10)
	case AttrSqsManagedSseEnabled:
		b, err := parseBool(name, v)
		if err != nil {
			return err
		}
		if b {
			delete(c.Extra, AttrKmsMasterKeyId)
			delete(c.Extra, AttrKmsDataKeyReusePeriodSeconds)
		}
		c.Extra[name] = boolString(b)
	case AttrKmsMasterKeyId:
		if v == "" {
			delete(c.Extra, AttrKmsMasterKeyId)
			delete(c.Extra, AttrKmsDataKeyReusePeriodSeconds)
			return nil
		}
		c.Extra[name] = v
		c.Extra[AttrSqsManagedSseEnabled] = "false"
	default:
		c.Extra[name] = v
	}
	return nil
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
