// Package streampb is the generated Go code of Sluice's stream protocol,
// stream.proto beside it (docs/streams.md documents it field by field).
// Do not edit stream.pb.go or stream_grpc.pb.go: change stream.proto and
// run go generate (generate.sh; pinned generators), and
// TestGeneratedCodeMatchesProto checks that the two agree.
package streampb

//go:generate ./generate.sh
