// Package wire holds the JSON shapes of Sluice's native API (/v1/): the
// bodies its routes take and the answers they give. Package api/native
// decodes requests into them and encodes its answers from them; package
// client encodes its requests from them and decodes the answers into them,
// so that each shape is written once. openapi.json (package api/native)
// documents the same shapes for other languages.
//
// The types are plain data: field names and JSON names are the API's, and
// the one rule of the wire the package decides itself is an attribute's
// value (AttributeValue). Request types leave out (omitempty) the optional
// fields a client does not give, so that the broker's defaults apply; the
// broker decodes them strictly (unknown members refused, see api/native),
// which is not these types' concern.
//
// Times are RFC 3339 in UTC; durations are whole seconds, in fields whose
// names end in Seconds.
//
// The package imports only the standard library: a client of the API
// links it without the broker.
package wire
